import StoreModel
import DequeModule
import PushDomain

/// Upstream messages and receipts on their way to the app servers: each sender's queue of what no
/// connection holds, each connection's window of what it was sent and has not ACKed, and the ids
/// that make an upstream message a duplicate. Dispatch (`dispatch`, through `handle`) hands the queue
/// to the connection with the most free window; the tick finds what expired or waited past the ACK
/// timeout without copying a queue (`expiredPending`, `takeDueInFlight`).
///
/// The router holds no I/O object: a connection is its id (the host keeps the link), a live upstream
/// write is an `UpstreamWriteID` (the host keeps its ticket and the device's answer).
///
/// The host changes the router through `handle` (OutboundRouter+Handle.swift) and the few operations
/// still `package` here (an upstream id claimed beside the registry's checks, a sender's or every
/// queue forgotten by a reset, the queue loaded at start); the steps `handle` is made of are internal.
package struct OutboundRouter {
    package init() {}

    package private(set) var connections: [String: ConnectionEntry] = [:]
    package private(set) var connectionsBySender: [String: [String]] = [:]
    /// Outbound messages per sender not on any connection, oldest first. A record put here goes
    /// through `append` or `requeue`, which keep the sender's expiry bound.
    package private(set) var pending: [String: Deque<OutboundRecord>] = [:]
    /// Per sender, a time before which no record of its pending queue expires (a lower bound:
    /// records taken out since may have raised the true first expiry). No bound: not known, the
    /// tick looks. So the tick reads a queue only when something in it may have expired, not every
    /// queue every second (a sender with no app server connected may hold 100,000).
    private var pendingExpiresNotBefore: [String: Int64] = [:]
    /// Ids of the upstream messages each device has waiting for each sender (pending or sent and
    /// not ACKed): the duplicate and per-device limit checks look here, not through the queues.
    package private(set) var upstreamIDs: [UpstreamHolder: Set<String>] = [:]
    private var roundRobin = 0
    /// In a cluster: items given up to the other nodes whose release is not committed yet, and items
    /// ACKed here whose removal is not: the admin view shows the first and not the second.
    package private(set) var releasing: [OutboundKey: OutboundRecord] = [:]
    package private(set) var removing: Set<OutboundKey> = []
    /// Upstream messages handed to an app server before their write was taken by the writer: an
    /// ACK that comes first calls the write off and answers the device (Engine+Outbound.swift).
    private var liveUpstream: [OutboundKey: UpstreamWriteID] = [:]
    private var lastWriteID: UInt64 = 0

    // MARK: connections

    /// A bound connection joins its sender's; false when the sender has `limit` already. `draining`:
    /// its link drains already (the host passes the link's own flag, so that the two agree from the
    /// start).
    mutating func addConnection(id: String, sender: String, draining: Bool = false, limit: Int) -> Bool {
        if (connectionsBySender[sender]?.count ?? 0) >= limit { return false }
        connections[id] = ConnectionEntry(senderID: sender, draining: draining)
        connectionsBySender[sender, default: []].append(id)
        return true
    }

    /// The connection's link started draining: it takes no new outbound traffic. Returns its sender;
    /// nil for an unknown connection.
    mutating func markDraining(_ id: String) -> String? {
        guard let at = connections.index(forKey: id) else { return nil }
        connections.values[at].draining = true
        return connections.values[at].senderID
    }

    /// The connection is gone: what it had not ACKed goes back to the front of its sender's queue.
    /// Returns its sender.
    mutating func removeConnection(_ id: String) -> String? {
        guard let entry = connections.removeValue(forKey: id) else { return nil }
        let sender = entry.senderID
        connectionsBySender[sender]?.removeAll { $0 == id }
        requeue(entry.inFlight.values.map(\.record), sender: sender)
        return sender
    }

    /// Whether the sender has a connection that takes outbound traffic (one not draining).
    package func hasOpenConnection(sender: String) -> Bool {
        (connectionsBySender[sender] ?? []).contains { connections[$0]?.draining == false }
    }

    /// Forgets what the connections of `sender` (every sender's, for nil) hold unACKed (a reset).
    package mutating func forgetInFlight(sender: String?) {
        let ids = sender.map { connectionsBySender[$0] ?? [] } ?? Array(connections.keys)
        for id in ids { connections[id]?.inFlight = [:] }
    }

    /// Forgets one sender's queue, upstream ids and unACKed items (its reset); its connections stay.
    package mutating func forget(sender: String) {
        pending[sender] = nil
        upstreamIDs = upstreamIDs.filter { $0.key.sender != sender }
        forgetInFlight(sender: sender)
    }

    // MARK: queues

    package func isQueueEmpty(sender: String) -> Bool { pending[sender]?.isEmpty ?? true }

    /// Takes the sender's whole queue out (given up to other nodes, or a live try that found no room).
    mutating func takeQueue(sender: String) -> Deque<OutboundRecord>? {
        pending.removeValue(forKey: sender)
    }

    /// Drops the oldest records past `limit` in the sender's queue; returns them.
    mutating func trim(sender: String, to limit: Int) -> [OutboundRecord] {
        var dropped: [OutboundRecord] = []
        while let count = pending[sender]?.count, count > limit, let oldest = pending[sender]?.removeFirst() {
            dropped.append(oldest)
        }
        return dropped
    }

    // MARK: upstream ids

    package enum UpstreamIDClaim {
        case claimed, duplicate, tooMany
    }

    /// Takes an upstream message id for its device and sender until it is released, so that a
    /// second copy sent before the first is committed is a duplicate too.
    package mutating func claimUpstreamID(_ messageID: String, for holder: UpstreamHolder, limit: Int) -> UpstreamIDClaim {
        // One lookup of the holder (its key hashes a 150-byte token), then through its index.
        let at = upstreamIDs.index(forKey: holder)
        if let at, upstreamIDs.values[at].contains(messageID) { return .duplicate }
        if (at.map { upstreamIDs.values[$0].count } ?? 0) >= limit { return .tooMany }
        if let at { upstreamIDs.values[at].insert(messageID) } else { upstreamIDs[holder] = [messageID] }
        return .claimed
    }

    /// An upstream message is done (ACKed, given up, or never stored): its id may be used again.
    mutating func releaseUpstreamID(of r: OutboundRecord) {
        guard r.kind == .upstream else { return }
        guard let at = upstreamIDs.index(forKey: UpstreamHolder(sender: r.senderID, token: r.token)) else { return }
        upstreamIDs.values[at].remove(r.messageID)
        if upstreamIDs.values[at].isEmpty { upstreamIDs.remove(at: at) }
    }

    // MARK: dispatch and ACKs

    /// Hands the sender's queue to its connections: each record to the connection with the most
    /// free window (ties broken round-robin), never past `window`, never to a draining one. Returns
    /// (connection id, record) in the order handed out.
    mutating func dispatch(sender: String, window: Int, now: Int64) -> [(connection: String, record: OutboundRecord)] {
        guard pending[sender]?.isEmpty == false else { return [] }
        // Each connection's entry is read once per round, through its index: reading
        // `connections[id]?.…` copied the whole entry (its in-flight map) for
        // every connection and every message handed out.
        var open: [(index: Dictionary<String, ConnectionEntry>.Index, free: Int)] = []
        for id in connectionsBySender[sender] ?? [] {
            guard let at = connections.index(forKey: id), !connections.values[at].draining else { continue }
            open.append((at, window - connections.values[at].inFlight.count))
        }
        guard !open.isEmpty else { return [] }
        // Taken out of the map while it is worked on: a copy read from the map shares its storage,
        // and the first removal then copied the whole queue (per message handed out).
        var queue = pending.removeValue(forKey: sender)!
        var out: [(connection: String, record: OutboundRecord)] = []
        roundRobin &+= 1
        while let next = queue.first {
            var best = -1
            var bestFree = 0
            for k in 0..<open.count {
                let i = (k + roundRobin) % open.count
                if open[i].free > bestFree { best = i; bestFree = open[i].free }
            }
            guard best >= 0 else { break }
            let at = open[best].index
            // Expired ones are dropped by the tick, which tells the device; until then (and for TTL
            // 0, "now or never") a free window takes them.
            queue.removeFirst()
            if connections.values[at].inFlight.updateValue(SentOutbound(record: next, sentAt: now), forKey: next.key) == nil {
                open[best].free -= 1
            }
            out.append((connections.keys[at], next))
            roundRobin &+= 1
        }
        pending[sender] = queue
        return out
    }

    /// An app server's ACK on `connectionID`: the item it means leaves that connection's window
    /// (only the connection that received it can ACK it). Nil for an unknown or duplicate ACK.
    mutating func acknowledge(connectionID: String, messageID: String, to: String?) -> (key: OutboundKey, sent: SentOutbound, sender: String)? {
        // Changed in place: a copy of the entry shared its in-flight map, which the removal then
        // copied whole (up to the window's 100 items per ACK).
        guard let at = connections.index(forKey: connectionID),
              let key = connections.values[at].acknowledged(messageID: messageID, to: to),
              let sent = connections.values[at].inFlight.removeValue(forKey: key) else { return nil }
        return (key, sent, connections.values[at].senderID)
    }

    // MARK: live upstream, cluster hand-offs

    /// The item went out before its write was taken: returns the id under which the host keeps the
    /// write's ticket and the device's answer.
    mutating func goLive(_ key: OutboundKey) -> UpstreamWriteID {
        lastWriteID &+= 1
        let id = UpstreamWriteID(value: lastWriteID)
        liveUpstream[key] = id
        return id
    }

    /// The live write committed (or failed): the entry of that write, if still there, goes (not a
    /// later write's of the same item).
    mutating func endLive(_ key: OutboundKey, write: UpstreamWriteID) {
        if liveUpstream[key] == write { liveUpstream[key] = nil }
    }

    /// The item's live write, if it has one not yet committed; the item has none from here on.
    mutating func takeLive(_ key: OutboundKey) -> UpstreamWriteID? { liveUpstream.removeValue(forKey: key) }

    mutating func markReleasing(_ records: [OutboundRecord]) { for r in records { releasing[r.key] = r } }

    mutating func releaseCommitted(_ records: [OutboundRecord]) { for r in records { releasing[r.key] = nil } }

    mutating func markRemoving(_ key: OutboundKey) { removing.insert(key) }

    mutating func removalCommitted(_ key: OutboundKey) { removing.remove(key) }

    // MARK: queue order and expiry

    /// Puts `record` at the end of its sender's queue.
    package mutating func append(_ record: OutboundRecord) {
        pending[record.senderID, default: []].append(record)
        lowerExpiryBound(sender: record.senderID, to: record.expiresAt)
    }

    /// Puts records back at the front of the sender's queue, oldest first.
    mutating func requeue(_ records: [OutboundRecord], sender: String) {
        guard !records.isEmpty else { return }
        let sorted = records.sorted { $0.createdAt < $1.createdAt }
        // Taken out of the map first, so that the queue is changed in place rather than copied.
        var queue = pending.removeValue(forKey: sender) ?? []
        queue.insert(contentsOf: sorted, at: 0)
        pending[sender] = queue
        for r in sorted { lowerExpiryBound(sender: sender, to: r.expiresAt) }
    }

    private mutating func lowerExpiryBound(sender: String, to expiresAt: Int64) {
        guard let at = pendingExpiresNotBefore.index(forKey: sender) else { return }  // unknown stays unknown
        if expiresAt < pendingExpiresNotBefore.values[at] { pendingExpiresNotBefore.values[at] = expiresAt }
    }

    /// Every sender's queue and every device's upstream ids, as a reset takes them and its undo
    /// puts them back.
    package struct Queued {
        package var pending: [String: Deque<OutboundRecord>]
        package var upstreamIDs: [UpstreamHolder: Set<String>]
    }

    /// Empties every queue and forgets every upstream id; returns what there was.
    package mutating func takeAllQueued() -> Queued {
        defer { (pending, upstreamIDs) = ([:], [:]) }
        return Queued(pending: pending, upstreamIDs: upstreamIDs)
    }

    /// Puts back what `takeAllQueued` took. The queues' expiry bounds are not known any more: the
    /// tick reads each queue once to learn them again.
    package mutating func restore(_ queued: Queued) {
        (pending, upstreamIDs) = (queued.pending, queued.upstreamIDs)
        pendingExpiresNotBefore = [:]
    }

    /// Takes the pending records that expired by `now` out of their queues, oldest first per sender.
    /// Reads only the queues whose bound has passed, and copies only those that lost a record.
    mutating func expiredPending(now: Int64) -> [OutboundRecord] {
        var expired: [OutboundRecord] = []
        for sender in Array(pending.keys) {
            if let bound = pendingExpiresNotBefore[sender], bound > now { continue }
            guard let queue = pending[sender] else { continue }
            var first = Int64.max
            var anyDead = false
            for r in queue {
                if r.expiresAt <= now { anyDead = true } else { first = min(first, r.expiresAt) }
            }
            if anyDead {
                var live = Deque<OutboundRecord>()
                for r in queue { if r.expiresAt <= now { expired.append(r) } else { live.append(r) } }
                pending[sender] = live
            }
            pendingExpiresNotBefore[sender] = first
        }
        // Bounds of queues that are gone (dispatched whole, or dropped with their sender).
        if pendingExpiresNotBefore.count > pending.count {
            pendingExpiresNotBefore = pendingExpiresNotBefore.filter { pending[$0.key] != nil }
        }
        return expired
    }

    /// Takes out of the connections' windows what expired by `now` and what was sent `ackTimeout`
    /// ago or more without an ACK. A window holds at most `--max-unacked` items: each is read in
    /// place, and changed only when one of its items is due. `timedOut` is per connection, in
    /// the order the connections were read; `senders` are those of the connections that lost
    /// an item (a window opened: what waits may go).
    mutating func takeDueInFlight(now: Int64, ackTimeout: Int64)
        -> (expired: [OutboundRecord], timedOut: [(sender: String, records: [OutboundRecord])], senders: Set<String>) {
        func expires(_ sent: SentOutbound) -> Bool { sent.record.expiresAt <= now }
        func isDue(_ sent: SentOutbound) -> Bool { expires(sent) || now - sent.sentAt >= ackTimeout }
        var expired: [OutboundRecord] = []
        var timedOut: [(sender: String, records: [OutboundRecord])] = []
        var senders: Set<String> = []
        let due = connections.indices.filter { connections.values[$0].inFlight.values.contains(where: isDue) }
        // Values change below, keys do not: the indices stay valid.
        for at in due {
            let keys = connections.values[at].inFlight.compactMap { isDue($0.value) ? $0.key : nil }
            var late: [OutboundRecord] = []
            for key in keys {
                guard let sent = connections.values[at].inFlight.removeValue(forKey: key) else { continue }
                if expires(sent) { expired.append(sent.record) } else { late.append(sent.record) }
            }
            let sender = connections.values[at].senderID
            timedOut.append((sender, late))
            senders.insert(sender)
        }
        return (expired, timedOut, senders)
    }
}
