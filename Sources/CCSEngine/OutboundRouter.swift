import StoreModel
import DequeModule
import PushDomain

extension Engine {
    /// Upstream messages and receipts on their way to the app servers: each sender's queue of what no
    /// connection holds, each connection's window of what it was sent and has not ACKed, and the ids
    /// that make an upstream message a duplicate. Dispatch (`Engine.dispatchOutbound`) hands the queue
    /// to the connection with the most free window; the tick finds what expired or waited past the ACK
    /// timeout without copying a queue (`expiredPending`, `takeDueInFlight`).
    struct OutboundRouter {
        var connections: [String: ConnectionEntry] = [:]
        var connectionsBySender: [String: [String]] = [:]
        /// Outbound messages per sender not on any connection, oldest first. A record put here goes
        /// through `append` or `requeue`, which keep the sender's expiry bound.
        var pending: [String: Deque<OutboundRecord>] = [:]
        /// Per sender, a time before which no record of its pending queue expires (a lower bound:
        /// records taken out since may have raised the true first expiry). No bound: not known, the
        /// tick looks. So the tick reads a queue only when something in it may have expired, not every
        /// queue every second (a sender with no app server connected may hold 100,000).
        private var pendingExpiresNotBefore: [String: Int64] = [:]
        /// Ids of the upstream messages each device has waiting for each sender (pending or sent and
        /// not ACKed): the duplicate and per-device limit checks look here, not through the queues.
        var upstreamIDs: [UpstreamHolder: Set<String>] = [:]
        var roundRobin = 0
        /// In a cluster: items given up to the other nodes whose release is not committed yet, and items
        /// ACKed here whose removal is not: the admin view shows the first and not the second.
        var releasing: [OutboundKey: OutboundRecord] = [:]
        var removing: Set<OutboundKey> = []
        /// Upstream messages handed to an app server before their write was taken by the writer: an
        /// ACK that comes first calls the write off and answers the device (Engine+Outbound.swift).
        var liveUpstream: [OutboundKey: LiveUpstream] = [:]

        /// Puts `record` at the end of its sender's queue.
        mutating func append(_ record: OutboundRecord) {
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
        struct Queued {
            var pending: [String: Deque<OutboundRecord>]
            var upstreamIDs: [UpstreamHolder: Set<String>]
        }

        /// Empties every queue and forgets every upstream id; returns what there was.
        mutating func takeAllQueued() -> Queued {
            defer { (pending, upstreamIDs) = ([:], [:]) }
            return Queued(pending: pending, upstreamIDs: upstreamIDs)
        }

        /// Puts back what `takeAllQueued` took. The queues' expiry bounds are not known any more: the
        /// tick reads each queue once to learn them again.
        mutating func restore(_ queued: Queued) {
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
                let sender = connections.values[at].info.senderID
                timedOut.append((sender, late))
                senders.insert(sender)
            }
            return (expired, timedOut, senders)
        }
    }

    struct SentOutbound {
        var record: OutboundRecord
        var sentAt: Int64
    }

    /// An outbound item is one device's: two devices may use the same upstream message id, and an
    /// app server may reuse a message id (and so a receipt id) for two devices.
    struct OutboundKey: Hashable {
        var kind: OutboundKind
        var token: String
        var messageID: String
    }

    /// A device's upstream messages to one sender.
    struct UpstreamHolder: Hashable {
        var sender: String
        var token: String
    }

    struct ConnectionEntry {
        var info: AppServerConnectionInfo
        let link: any AppServerLink
        /// Upstream messages and receipts written to this connection and not yet ACKed.
        var inFlight: [OutboundKey: SentOutbound] = [:]

        /// The in-flight item an app server's ACK of `messageID` (receipts with or without `dr2:`)
        /// means: the one from the device named by `to` when there is one, else the oldest with that id
        /// (a receipt's ACK carries no device; same-id receipts are then ACKed oldest first).
        func acknowledged(messageID: String, to: String?) -> OutboundKey? {
            if let to, inFlight[OutboundKey(kind: .upstream, token: to, messageID: messageID)] != nil {
                return OutboundKey(kind: .upstream, token: to, messageID: messageID)
            }
            let receiptID = DeliveryReceipt.messageIDPrefix + messageID
            var best: (key: OutboundKey, sent: SentOutbound)?
            for (key, sent) in inFlight where key.messageID == messageID || key.messageID == receiptID {
                if key.token == to { return key }
                if best == nil || (sent.sentAt, sent.record.createdAt) < (best!.sent.sentAt, best!.sent.record.createdAt) {
                    best = (key, sent)
                }
            }
            return best?.key
        }
    }

    struct LiveUpstream {
        let ticket: WriteTicket
        let settle: @Sendable (UpstreamOutcome) -> Void
    }
}
