import DeliveryCore
import PushDomain
import StoreModel

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
                handleOutbound(.writeFailed(record))
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
        let now = clock.nowMillis()
        let ticket = WriteTicket()
        let actions = state.withLock { s -> [OutboundAction]? in
            let effects = s.outbound.handle(.upstreamAccepted(record), at: now, outboundRules)
            guard case .writeLive(_, let write)? = effects.first else { return nil }
            // The router names the write; its ticket and the device's answer stay here.
            s.upstreamWrites[write] = LiveUpstream(ticket: ticket, settle: completion)
            return apply(effects, &s)
        }
        guard let actions else { return false }
        performOutbound(actions, now: now)
        return true
    }

    /// Submits a live upstream's write with its ticket. Called before its hand-out is written, so
    /// before the app server can see the message (and ACK it, and ask for its removal). Its
    /// completion takes the lock; the committer never runs a completion inside `submit`, even once
    /// stopped. The device's answer goes through this write's own `settle`, not the table's entry
    /// (an undo that restores an older state may have lost that).
    private func submitLiveWrite(_ record: OutboundRecord, _ write: UpstreamWriteID, _ live: LiveUpstream) {
        committer.submit([.addOutbound(record)], ticket: live.ticket) { [self] error in
            let effects = state.withLock { s in
                s.upstreamWrites[write] = nil
                return s.outbound.handle(.liveWriteFinished(record, write: write, failed: error != nil),
                                         at: clock.nowMillis(), outboundRules)
            }
            for case .answer(_, let outcome) in effects { live.settle(outcome) }
        }
    }

    private enum UpstreamCheck {
        case ok(app: String, from: String)
        case error(UpstreamError)
    }

    /// A committed outbound message joins its sender's queue and goes out if a window is free.
    func enqueueOutbound(_ record: OutboundRecord) {
        handleOutbound(.committed(record))
    }

    /// The router's limits, from the configuration.
    var outboundRules: OutboundRules {
        OutboundRules(window: configuration.maxUnackedOutbound, ackTimeoutMillis: configuration.ackTimeoutMillis,
                      maxConnectionsPerSender: configuration.maxConnectionsPerSender,
                      maxPendingPerSender: configuration.maxPendingOutboundPerSender, clustered: cluster != nil)
    }

    /// Runs one event through the router under the hub's lock and carries out its effects.
    func handleOutbound(_ event: OutboundEvent) {
        let now = clock.nowMillis()
        let actions = state.withLock { s in apply(s.outbound.handle(event, at: now, outboundRules), &s) }
        performOutbound(actions, now: now)
    }

    /// Does, under the lock, the part of the router's effects that belongs there, in the order the
    /// router returned them: the domain events, the host's tables, and the store writes. Writes are
    /// submitted HERE, under the lock, because their order is the store's: a removal must reach the
    /// committer after the add it undoes, and the next event's writes after this one's. Returns the
    /// rest, for after the lock, in the same order.
    func apply(_ effects: [OutboundEffect], _ s: inout State) -> [OutboundAction] {
        var after: [OutboundAction] = []
        for effect in effects {
            switch effect {
            case .handOut(let sender, let handed):
                after.append(.send(sends(handedOut: handed, sender: sender, s)))
            case .receiptAcked(let r, let connection):
                if let about = r.aboutMessageID {
                    report(.receipt(.acked, aboutMessageID: about, sender: r.senderID, token: r.token, connection: connection))
                }
            case .write(let ops, let removing):
                submitOutbound(ops, removing: removing)
            case .writeLive(let record, let write):
                // `upstreamLive` put the ticket and the answer there before it applied the effects;
                // no other caller feeds `.upstreamAccepted`.
                guard let live = s.upstreamWrites[write] else { preconditionFailure("a live upstream write without its ticket") }
                after.append(.writeLive(record, write, live))
            case .callOffLiveWrite(let write, let answer, let otherwise):
                // `cancel` takes the committer's lock: only the host calls it.
                if let live = s.upstreamWrites[write], live.ticket.cancel() {
                    s.upstreamWrites[write] = nil
                    after.append(.answer(live.settle, answer))
                } else {
                    submitOutbound(otherwise, removing: nil)
                }
            case .callOff(let write):
                if let live = s.upstreamWrites[write], live.ticket.cancel() { s.upstreamWrites[write] = nil }
            case .answer(let write, let outcome):
                if let live = s.upstreamWrites.removeValue(forKey: write) { after.append(.answer(live.settle, outcome)) }
            case .release(let records): after.append(.release(records))
            case .claim(let sender): after.append(.claim(sender))
            case .queueFull(let sender, let count): after.append(.queueFull(sender: sender, count: count))
            case .drop(let record, let error): after.append(.drop(record, error))
            case .refused: break  // the caller saw it: it closes the connection
            }
        }
        return after
    }

    private func submitOutbound(_ ops: [StoreOp], removing: OutboundKey?) {
        guard let removing else { return committer.submit(ops) }
        committer.submit(ops) { [self] _ in handleOutbound(.removalCommitted(removing)) }
    }

    /// The rest of the router's effects, after the lock, in order.
    func performOutbound(_ actions: [OutboundAction], now: Int64) {
        for action in actions {
            switch action {
            case .send(let sends): perform(sends)
            case .writeLive(let record, let write, let live): submitLiveWrite(record, write, live)
            case .answer(let settle, let outcome): settle(outcome)
            case .release(let records): release(records)
            case .claim(let sender): cluster?.claimOutbound(senderID: sender)
            case .queueFull(let sender, let count):
                logger.warning("outbound queue full: dropped the oldest", metadata: ["sender": "\(sender)", "count": "\(count)"])
            case .drop(let record, let error): outboundDropped(record, now: now, error: error)
            }
        }
    }

    /// What the router handed out, as writes to the connections' links (one per connection), each
    /// counted and journaled.
    private func sends(handedOut handed: [(connection: String, record: OutboundRecord)], sender: String, _ s: State) -> [Send] {
        var batches: [String: [OutboundMessage]] = [:]
        for (chosen, next) in handed {
            report(.outboundSent(next.kind))
            if let about = next.aboutMessageID {
                report(.receipt(.sent, aboutMessageID: about, sender: sender, token: next.token, connection: chosen))
            }
            batches[chosen, default: []].append(OutboundMessage(messageID: next.messageID, json: next.json))
        }
        return batches.compactMap { id, messages in
            s.appServers[id].map { .appServer($0.link, messages) }
        }
    }

    /// An app server ACKed an upstream message or a receipt on `connectionID`. Only the connection that
    /// received the message can ACK it; receipts may be ACKed with or without the `dr2:` prefix; `to`
    /// (the device, for upstream) picks among same-id items of different devices.
    /// Unknown and duplicate ACKs are ignored.
    public func appServerAcknowledged(connectionID: String, messageID: String, to: String? = nil) {
        handleOutbound(.acknowledged(connection: connectionID, messageID: messageID, to: to))
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
        let actions = state.withLock { s in apply(s.outbound.handle(.tick, at: now, outboundRules), &s) }
        performOutbound(actions, now: now)
        if configuration.collapsibleThrottle != nil { releaseThrottled(now: now) }
    }

    /// An outbound message is given up (its time ran out before any app server ACKed it, or the
    /// sender's queue overflowed): it is dropped, and the device that sent it (upstream) gets
    /// `send_error` with `error` through its queue. The router has taken it out of its state (its id
    /// released, its live write called off: `OutboundEffect.callOff`) under the lock already.
    func outboundDropped(_ r: OutboundRecord, now: Int64, error: UpstreamError) {
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
