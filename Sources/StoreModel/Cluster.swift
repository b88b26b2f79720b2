/// Several emulator nodes on one shared store acting as one service (docs/scaling.md): what the
/// engine tells the other nodes, and what it is told. The PostgreSQL backend implements it
/// (`PostgresCluster`); on SQLite there is none, and the engine runs alone.
///
/// Delivery never depends on a message between nodes arriving: every message is written unless the
/// device's confirmation came back first, and what nodes tell each other only shortens the wait (a
/// periodic sweep catches up on the rest).
public protocol ClusterCoordinator: Sendable {
    /// This node's id (lower-case hex), unique per run.
    var nodeID: String { get }
    /// This node's slot among `MessageIDSlot.count`, held by no other live node: the remainder of the
    /// microseconds of every device message id it mints, so that no two nodes mint the same id.
    var messageIDSlot: Int { get }
    /// Starts taking part: the node's lease, listening for the other nodes, the periodic sweep.
    func start(events: any ClusterEvents)
    /// Leaves: the lease ends now (the other nodes take over this node's devices and items at once).
    func stop()
    /// A device connected here: its presence is recorded (committed) before `then` runs, so that a
    /// message committed later on another node is announced to this one.
    func deviceOnline(token: String, then: @escaping @Sendable () -> Void)
    /// The device's connection here closed.
    func deviceOffline(token: String)
    /// This node holds a connection of the sender now: it takes the sender's items no live node holds.
    func claimOutbound(senderID: String)
    /// Upstream messages and receipts waiting in the store that this node does not hold (another node
    /// holds them, or none does yet), for the admin API's view of the whole service.
    func outboundHeldElsewhere() throws -> [OutboundRecord]
    /// Items this node holds but cannot send (no connection of their sender here any more): any node
    /// with a connection of the sender may take them.
    /// `then` runs once the release is committed (or has failed: the items stay this node's until its
    /// lease ends).
    func releaseOutbound(_ records: [OutboundRecord], then: @escaping @Sendable () -> Void)
    /// The node a device is connected to, as last announced (nil: here, nowhere, or not known yet).
    /// A stale answer only costs time: a message offered to the wrong node is written after its delay.
    func node(holding token: String) -> String?
    /// Hands a message to the device's node before its write is due (docs/scaling.md, "confirmed
    /// before written"). Not a promise: the offer may be lost or refused, and the write then goes on.
    func offerLive(_ message: QueuedMessage, to node: String)
    /// Tells the node that offered a message that its device confirmed it: that node may call its
    /// write off.
    func confirmLive(deviceMessageID: String, to node: String)
}

/// What a node is told of the others.
public protocol ClusterEvents: AnyObject, Sendable {
    /// Messages were committed for a device connected here: it reads the device's queue.
    func clusterQueueChanged(token: String)
    /// This message was committed for a device connected here (announced with the message itself).
    func clusterMessageCommitted(_ message: QueuedMessage)
    /// Another node offers messages for devices connected here before writing them.
    func clusterLiveOffered(_ messages: [QueuedMessage], from node: String)
    /// Devices on another node confirmed messages this node offered them.
    func clusterLiveConfirmed(deviceMessageIDs: [String])
    /// Upstream messages and receipts this node now holds (claimed for it), to send to its connections.
    func clusterClaimed(_ records: [OutboundRecord])
    /// Another node changed shared state: this node reads it again.
    func clusterRegistryChanged(_ change: RegistryChange)
    /// The senders with a connection on this node (the sweep claims their unheld items).
    func clusterConnectedSenders() -> [String]
    /// The engine's clock (wall or virtual), in which items' expiry is written.
    func clusterClockMillis() -> Int64
}

/// A change to the state every node keeps in memory, made by another node.
public enum RegistryChange: Sendable, Equatable {
    case device(token: String)
    case sender(id: String)
    case subscriptions(token: String)
    case deviceGroup(id: String)
    /// A reset: every device, subscription and group read again.
    case everything
    /// Another node moved the shared virtual clock to this time (ms); a node behind it follows.
    case clock(millis: Int64)
}

/// Keys of the store's meta table that more than one module reads.
public enum MetaKey {
    /// The virtual clock's time (ms), kept across restarts and shared by a cluster's nodes.
    public static let virtualClock = "virtual_clock_ms"
}
