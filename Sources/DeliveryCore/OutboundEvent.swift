import PushDomain
import StoreModel

/// What happens to the app-server side, as the host (the engine) tells the router
/// (`OutboundRouter.handle`). Each event is one step under the host's lock; its answer is a list of
/// `OutboundEffect`s for the host to carry out.
package enum OutboundEvent {
    /// An app-server connection was bound. `draining`: its link drains already.
    case connectionOpened(id: String, sender: String, draining: Bool)
    /// The connection's link started draining (it sent CONNECTION_DRAINING): no new traffic for it.
    case connectionDraining(id: String)
    /// The connection is gone: what it had not ACKed goes to the sender's other connections.
    case connectionClosed(id: String)
    /// An app server ACKed `messageID` on the connection; `to` names the device (upstream only).
    case acknowledged(connection: String, messageID: String, to: String?)
    /// A device's upstream message, accepted and not written yet: it goes out before its write when
    /// nothing of its sender waits and a window is free (a live upstream, Engine+Outbound.swift).
    case upstreamAccepted(OutboundRecord)
    /// The write of a live upstream committed, or failed.
    case liveWriteFinished(OutboundRecord, write: UpstreamWriteID, failed: Bool)
    /// The write of an upstream message that did not go live failed: it is not kept, and its id may
    /// be used again (the host answers the device).
    case writeFailed(OutboundRecord)
    /// An outbound record in the store (committed here, or claimed from other nodes): it waits in
    /// its sender's queue or goes out.
    case committed(OutboundRecord)
    /// The store removed an item ACKed here (a cluster: `OutboundEffect.write(_, removing:)`).
    case removalCommitted(OutboundKey)
    /// The store gave these items up to the other nodes (`OutboundEffect.release`).
    case releaseCommitted([OutboundRecord])
    /// Time passed: what expired is given up, what waited past the ACK timeout goes out again.
    case tick
}

/// What the router asks of its host, in the order the host is to do it.
package enum OutboundEffect {
    /// Write these records to these connections, in this order (`sender`'s queue handed out). Each is
    /// also the domain event "sent to an app server" (a receipt's too).
    case handOut(sender: String, [(connection: String, record: OutboundRecord)])
    /// The connection is refused: its sender has as many as allowed. The host closes it.
    case refused(connection: String)
    /// The receipt's ACK (a domain event: the receipt's history, the audit).
    case receiptAcked(OutboundRecord, connection: String)
    /// Write these ops. `removing`: feed `.removalCommitted(key)` back when they commit.
    case write([StoreOp], removing: OutboundKey?)
    /// Write the live upstream's record (with its ticket, before its hand-out goes out), and feed
    /// `.liveWriteFinished` back when it commits or fails.
    case writeLive(OutboundRecord, UpstreamWriteID)
    /// The item was ACKed before its live write: call the write off; when that worked, give the
    /// device `answer`; when the writer took it already, write `otherwise` (the removal).
    case callOffLiveWrite(UpstreamWriteID, answer: UpstreamOutcome, otherwise: [StoreOp])
    /// The item was given up before its live write: call the write off if it is not taken yet.
    case callOff(UpstreamWriteID)
    /// Answer the device of a live upstream: its write committed (`sent`) or failed.
    case answer(UpstreamWriteID, UpstreamOutcome)
    /// A cluster: the sender has no open connection here; give these items up to the other nodes
    /// (and feed `.releaseCommitted` back). The admin view lists them until then.
    case release([OutboundRecord])
    /// A cluster: a connection of the sender opened; take what waits for it in the store.
    case claim(sender: String)
    /// The sender's queue was full: `count` of its oldest records are dropped (the `.drop`s follow).
    case queueFull(sender: String, count: Int)
    /// The item is given up: remove it from the store and, for upstream, tell the device `error`.
    case drop(OutboundRecord, UpstreamError)
}

/// The limits the router works under (the engine's configuration), and whether this node is one of
/// a cluster.
package struct OutboundRules {
    /// Items per connection written and not ACKed, at most (`--max-unacked`).
    package var window: Int
    /// An item not ACKed this long after it was written goes out again.
    package var ackTimeoutMillis: Int64
    package var maxConnectionsPerSender: Int
    /// Items kept per sender while no connection takes them; past it the oldest are dropped.
    package var maxPendingPerSender: Int
    /// Other nodes share the store: what no connection here takes is given up to them.
    package var clustered: Bool

    package init(window: Int, ackTimeoutMillis: Int64, maxConnectionsPerSender: Int, maxPendingPerSender: Int,
                 clustered: Bool) {
        self.window = window
        self.ackTimeoutMillis = ackTimeoutMillis
        self.maxConnectionsPerSender = maxConnectionsPerSender
        self.maxPendingPerSender = maxPendingPerSender
        self.clustered = clustered
    }
}
