import DeliveryCore
import PushDomain
import StoreModel
import DequeModule

/// Upstream messages (device → app server) and delivery receipts: stored until an app server ACKs
/// them, spread over the sender's connections by free window, redelivered when a connection closes
/// or an ACK does not come in time.
extension Engine {
    /// An upstream message from a device, as the device channel read it from the device's message.
    public func upstream(from token: String, _ request: UpstreamRequest,
                         completion: @escaping @Sendable (UpstreamOutcome) -> Void) {
        let (messageID, to, timeToLive, data) = (request.messageID, request.to, request.timeToLive, request.data)
        // `to` is the sender (`SENDER_ID@gcm.googleapis.com`) or a device group's notification key
        // (seed 004's `sendMessage:to:…` with a key): then it goes to the group's sender, marked with
        // the key and the group's name (docs/semantics.md, "Upstream to a device group").
        var senderID = String(to.split(separator: "@", maxSplits: 1).first ?? "")
        var group: UpstreamGroup?
        if NotificationKey.groupID(of: to) != nil {
            guard let found = upstreamGroup(key: to, token: token) else {
                completion(.sendError(messageID: messageID, error: .invalidSender))
                return
            }
            senderID = found.sender
            group = UpstreamGroup(key: to, name: found.name)
        }
        let now = clock.nowMillis()
        let check: UpstreamCheck = state.withLock { s in
            guard let device = s.registry.devices[token], device.status == .active else { return .error(.deviceUnregistered) }
            guard device.senders.contains(senderID) else { return .error(.invalidSender) }
            // The id is taken from here on (until ACKed or given up).
            switch s.outbound.claimUpstreamID(messageID, for: UpstreamHolder(sender: senderID, token: token),
                                              limit: configuration.maxPendingUpstreamPerDevice) {
            case .duplicate: return .error(.duplicateMessageID)
            case .tooMany: return .error(.tooManyMessages)
            case .claimed: return .ok(app: device.app, from: device.canonicalToken)
            }
        }
        let category: String, from: String
        switch check {
        case .error(let e): completion(.sendError(messageID: messageID, error: e)); return
        case .ok(let app, let canonical): (category, from) = (app, canonical)
        }
        // `from` is the installation's newest token: the one its app knows after a refresh.
        let json = StoredJSON.upstream(UpstreamMessage(category: category, data: data, messageID: messageID, from: from,
                                                       timeToLive: timeToLive, group: group))
        let ttl = Int64(timeToLive ?? Message.maximumTimeToLive)
        let record = OutboundRecord(senderID: senderID, kind: .upstream, messageID: messageID, token: token,
                                    json: json, createdAt: now, expiresAt: now + ttl * 1000)
        if cluster == nil, upstreamLive(record, completion: completion) { return }
        committer.submit(.addOutbound(record)) { [self] error in
            if error != nil {
                state.withLock { $0.outbound.releaseUpstreamID(of: record) }
                completion(.sendError(messageID: messageID, error: .internalServerError))
                return
            }
            completion(.sent(messageID: messageID))
            enqueueOutbound(record)
        }
    }

    /// The mirror of a downstream message handed to an online device: when an app-server connection of
    /// the sender has a free window and nothing of the sender waits before it, the upstream message goes
    /// out at once and its write waits `--live-write-delay`. An app server's ACK within that time calls
    /// the write off (the message is delivered: nothing is left to lose) and the device hears `sent`
    /// then; otherwise the device hears `sent` from the commit, as for every upstream message. Either
    /// way `sent` means "delivered or durable". False when it cannot go out now (nothing was done).
    private func upstreamLive(_ record: OutboundRecord, completion: @escaping @Sendable (UpstreamOutcome) -> Void) -> Bool {
        let key = record.key
        let ticket = WriteTicket()
        let sends = state.withLock { s -> [Send]? in
            guard s.outbound.isQueueEmpty(sender: record.senderID) else { return nil }
            s.outbound.append(record)
            let sends = dispatchOutbound(sender: record.senderID, &s)
            // No open connection had room: it was the only item, so nothing went out.
            guard s.outbound.isQueueEmpty(sender: record.senderID) else {
                _ = s.outbound.takeQueue(sender: record.senderID)
                return nil
            }
            s.outbound.goLive(key, LiveUpstream(ticket: ticket, settle: completion))
            return sends
        }
        guard let sends else { return false }
        // Submitted before the app server can see the message (so before its ACK, and before the
        // removal that an ACK after the write submits). Its completion takes the lock; the committer
        // never runs a completion inside `submit`, even once stopped.
        committer.submit([.addOutbound(record)], ticket: ticket) { [self] error in
            state.withLock { s in
                s.outbound.endLive(key, ticket: ticket)
                if error != nil { s.outbound.releaseUpstreamID(of: record) }
            }
            completion(error == nil ? .sent(messageID: record.messageID)
                                    : .sendError(messageID: record.messageID, error: .internalServerError))
        }
        perform(sends)
        return true
    }

    private enum UpstreamCheck {
        case ok(app: String, from: String)
        case error(UpstreamError)
    }

    /// A committed outbound message joins its sender's queue and goes out if a window is free.
    func enqueueOutbound(_ record: OutboundRecord) {
        var dropped: [OutboundRecord] = []
        var released = false
        var expired = false
        let sends = state.withLock { s -> [Send] in
            if cluster != nil && !Self.hasOpenConnection(sender: record.senderID, s) {
                s.outbound.releaseUpstreamID(of: record)
                if record.expiresAt <= clock.nowMillis() {
                    // Taken for its expiry (the cluster's sweep): given up here, as the tick would.
                    expired = true
                } else {
                    // Another node may have a connection of the sender: it takes the item from the store.
                    released = true
                }
                return []
            }
            s.outbound.append(record)
            let sends = dispatchOutbound(sender: record.senderID, &s)
            dropped = s.outbound.trim(sender: record.senderID, to: configuration.maxPendingOutboundPerSender)
            for r in dropped { s.outbound.releaseUpstreamID(of: r) }
            return sends
        }
        if released { release([record]) }
        if expired { outboundDropped(record, now: clock.nowMillis(), error: .ttlExceeded) }
        perform(sends)
        if !dropped.isEmpty {
            let now = clock.nowMillis()
            logger.warning("outbound queue full: dropped the oldest", metadata: ["sender": "\(record.senderID)", "count": "\(dropped.count)"])
            for r in dropped { outboundDropped(r, now: now, error: .tooManyMessages) }
        }
    }

    /// Whether the sender has a connection here that takes outbound traffic (one not draining).
    static func hasOpenConnection(sender: String, _ s: State) -> Bool {
        s.outbound.hasOpenConnection(sender: sender)
    }

    /// In a cluster: when the sender has no open connection here any more, what waits here for it is
    /// given up to the other nodes (taken out of this node's state; the caller releases the records).
    func releasableOutbound(sender: String, _ s: inout State) -> [OutboundRecord] {
        guard cluster != nil, !Self.hasOpenConnection(sender: sender, s),
              let queue = s.outbound.takeQueue(sender: sender) else { return [] }
        for r in queue { s.outbound.releaseUpstreamID(of: r) }
        return Array(queue)
    }

    /// Hands queued outbound messages to the sender's connections (`OutboundRouter.dispatch`), and
    /// counts and journals each.
    func dispatchOutbound(sender: String, _ s: inout State) -> [Send] {
        let handed = s.outbound.dispatch(sender: sender, window: configuration.maxUnackedOutbound, now: clock.nowMillis())
        guard !handed.isEmpty else { return [] }
        var batches: [String: [OutboundMessage]] = [:]
        for (chosen, next) in handed {
            report(.outboundSent(next.kind))
            if let about = next.aboutMessageID {
                report(.receipt(.sent, aboutMessageID: about, sender: sender, token: next.token, connection: chosen))
            }
            batches[chosen, default: []].append(OutboundMessage(messageID: next.messageID, json: next.json))
        }
        return batches.compactMap { id, messages in
            s.outbound.connections[id].map { .appServer($0.link, messages) }
        }
    }

    /// An app server ACKed an upstream message or a receipt on `connectionID`. Only the connection that
    /// received the message can ACK it; receipts may be ACKed with or without the `dr2:` prefix; `to`
    /// (the device, for upstream) picks among same-id items of different devices.
    /// Unknown and duplicate ACKs are ignored.
    public func appServerAcknowledged(connectionID: String, messageID: String, to: String? = nil) {
        var settled: (settle: @Sendable (UpstreamOutcome) -> Void, messageID: String)?
        let sends = state.withLock { s -> [Send] in
            guard let (key, sent, senderID) = s.outbound.acknowledge(connectionID: connectionID, messageID: messageID, to: to)
            else { return [] }
            s.outbound.releaseUpstreamID(of: sent.record)
            if let about = sent.record.aboutMessageID {
                report(.receipt(.acked, aboutMessageID: about, sender: sent.record.senderID, token: sent.record.token,
                                connection: connectionID))
            }
            if let live = s.outbound.takeLive(key), live.ticket.cancel() {
                // Its write was called off: there is nothing to remove, and the device's `sent` is due now.
                settled = (live.settle, sent.record.messageID)
                return dispatchOutbound(sender: senderID, &s)
            }
            let op = StoreOp.removeOutbound(senderID: sent.record.senderID, kind: sent.record.kind,
                                            token: sent.record.token, messageID: sent.record.messageID)
            if cluster != nil {
                // Until the removal commits, the store still holds it: the admin view must not list it.
                s.outbound.markRemoving(key)
                committer.submit(op) { [self] _ in state.withLock { $0.outbound.removalCommitted(key) } }
            } else {
                committer.submit(op)
            }
            return dispatchOutbound(sender: senderID, &s)
        }
        if let settled { settled.settle(.sent(messageID: settled.messageID)) }
        perform(sends)
    }

    public struct OutboundSnapshot: Sendable {
        public var senderID: String
        public var kind: OutboundKind
        public var messageID: String
        public var token: String
        public var connectionID: String?
        public var expiresAt: Int64
    }

    /// Every upstream message and receipt not yet ACKed, for the admin API. In a cluster, also those
    /// no node holds now (in the store, waiting for a connection of their sender on any node).
    public func outbound() -> [OutboundSnapshot] {
        var held = outboundHeldHere()
        if let cluster {
            let (releasing, removing) = state.withLock { ($0.outbound.releasing, $0.outbound.removing) }
            for r in releasing.values {
                held.append(OutboundSnapshot(senderID: r.senderID, kind: r.kind, messageID: r.messageID, token: r.token,
                                             connectionID: nil, expiresAt: r.expiresAt))
            }
            let here = Set(held.map { OutboundKey(kind: $0.kind, token: $0.token, messageID: $0.messageID) })
            let elsewhere = (try? cluster.outboundHeldElsewhere()) ?? []
            for r in elsewhere where !here.contains(r.key) && !removing.contains(r.key) {
                held.append(OutboundSnapshot(senderID: r.senderID, kind: r.kind, messageID: r.messageID, token: r.token,
                                             connectionID: nil, expiresAt: r.expiresAt))
            }
        }
        return held
    }

    private func outboundHeldHere() -> [OutboundSnapshot] {
        state.withLock { s in
            var out: [OutboundSnapshot] = []
            for (id, entry) in s.outbound.connections {
                for sent in entry.inFlight.values {
                    out.append(OutboundSnapshot(senderID: sent.record.senderID, kind: sent.record.kind,
                                                messageID: sent.record.messageID, token: sent.record.token,
                                                connectionID: id, expiresAt: sent.record.expiresAt))
                }
            }
            for (_, queue) in s.outbound.pending {
                for r in queue {
                    out.append(OutboundSnapshot(senderID: r.senderID, kind: r.kind, messageID: r.messageID,
                                                token: r.token, connectionID: nil, expiresAt: r.expiresAt))
                }
            }
            return out
        }
    }

    // MARK: time

    /// Runs what time triggers: drops expired downstream messages, drops expired upstream messages
    /// (the device gets `send_error`), and sends again what was not ACKed within the ACK timeout.
    /// Called every second on the wall clock, and after every advance of the virtual clock.
    public func tick() {
        let now = clock.nowMillis()
        committer.submit(.removeExpired(now: now))
        var expired: [OutboundRecord] = []
        let sends = state.withLock { s -> [Send] in
            expired = s.outbound.expiredPending(now: now)
            let due = s.outbound.takeDueInFlight(now: now, ackTimeout: configuration.ackTimeoutMillis)
            expired += due.expired
            for (sender, records) in due.timedOut { s.outbound.requeue(records, sender: sender) }
            for r in expired { s.outbound.releaseUpstreamID(of: r) }
            return due.senders.flatMap { dispatchOutbound(sender: $0, &s) }
        }
        perform(sends)
        for r in expired { outboundDropped(r, now: now, error: .ttlExceeded) }
        if configuration.collapsibleThrottle != nil { releaseThrottled(now: now) }
    }

    /// An outbound message is given up (its time ran out before any app server ACKed it, or the
    /// sender's queue overflowed): it is dropped, and the device that sent it (upstream) gets
    /// `send_error` with `error` through its queue. The caller has taken it out of the engine's state
    /// (its id released) under the lock already.
    func outboundDropped(_ r: OutboundRecord, now: Int64, error: UpstreamError) {
        // Given up before its live write was taken: it is never written, and the device hears only
        // `send_error`. (Taken already: its commit answers `sent` first, as on the path without one.)
        if let live = state.withLock({ $0.outbound.takeLive(r.key) }) { _ = live.ticket.cancel() }
        var ops: [StoreOp] = [.removeOutbound(senderID: r.senderID, kind: r.kind, token: r.token, messageID: r.messageID)]
        var notice: QueuedMessage?
        if r.kind == .upstream {
            let id = "send_error:\(r.messageID)"
            let payload = StoredJSON.sendError(messageID: r.messageID, error: error)
            let m = QueuedMessage(token: r.token, deviceMessageID: id, senderID: r.senderID, appMessageID: r.messageID,
                                  collapseKey: nil, priority: Priority.high.rawValue,
                                  timeToLive: Message.maximumTimeToLive, enqueuedAt: now,
                                  expiresAt: now + Int64(Message.maximumTimeToLive) * 1000,
                                  deliveryReceiptRequested: false, kind: .sendError, payload: payload)
            ops.append(.enqueue(m, limits: nil))
            notice = m
        }
        committer.submit(ops) { [self, notice] error in
            if error == nil, let notice { handOver([notice], to: r.token) }
        }
    }
}

extension OutboundRecord {
    var key: Engine.OutboundKey { Engine.OutboundKey(kind: kind, token: token, messageID: messageID) }
}
