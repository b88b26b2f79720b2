import PushDomain
import StoreModel

/// The router as a state machine: one event in, the effects for the host out. Nothing here waits,
/// locks, reads a clock or calls out; the host runs `handle` under its lock, does the effects (the
/// store writes among them in the order returned) and feeds what comes of them back as events.
extension OutboundRouter {
    package mutating func handle(_ event: OutboundEvent, at now: Int64, _ rules: OutboundRules) -> [OutboundEffect] {
        switch event {
        case .connectionOpened(let id, let sender, let draining):
            guard addConnection(id: id, sender: sender, draining: draining, limit: rules.maxConnectionsPerSender) else {
                return [.refused(connection: id)]
            }
            return handOut(sender: sender, now, rules) + (rules.clustered ? [.claim(sender: sender)] : [])
        case .connectionDraining(let id):
            guard let sender = markDraining(id) else { return [] }
            let handed = handOut(sender: sender, now, rules)
            // The release goes first, as the items handed out here cannot be among those released.
            return releasable(sender: sender, rules) + handed
        case .connectionClosed(let id):
            guard let sender = removeConnection(id) else { return [] }
            let released = releasable(sender: sender, rules)
            return released + handOut(sender: sender, now, rules)
        case .acknowledged(let connection, let messageID, let to):
            return acknowledged(connection: connection, messageID: messageID, to: to, now, rules)
        case .upstreamAccepted(let record):
            return upstreamAccepted(record, now, rules)
        case .liveWriteFinished(let record, let write, let failed):
            endLive(record.key, write: write)
            if failed { releaseUpstreamID(of: record) }
            return [.answer(write, failed ? .sendError(messageID: record.messageID, error: .internalServerError)
                                          : .sent(messageID: record.messageID))]
        case .writeFailed(let record):
            releaseUpstreamID(of: record)
            return []
        case .committed(let record):
            return committed(record, now, rules)
        case .removalCommitted(let key):
            removalCommitted(key)
            return []
        case .releaseCommitted(let records):
            releaseCommitted(records)
            return []
        case .tick:
            return tick(now, rules)
        }
    }

    /// Hands the sender's queue out (`dispatch`) as one effect; none when nothing went out.
    private mutating func handOut(sender: String, _ now: Int64, _ rules: OutboundRules) -> [OutboundEffect] {
        let handed = dispatch(sender: sender, window: rules.window, now: now)
        return handed.isEmpty ? [] : [.handOut(sender: sender, handed)]
    }

    /// In a cluster: when the sender has no open connection here any more, what waits here for it is
    /// given up to the other nodes (taken out of this node's state, listed as releasing until the
    /// store says it is done).
    private mutating func releasable(sender: String, _ rules: OutboundRules) -> [OutboundEffect] {
        guard rules.clustered, !hasOpenConnection(sender: sender), let queue = takeQueue(sender: sender),
              !queue.isEmpty else { return [] }
        for r in queue { releaseUpstreamID(of: r) }
        let records = Array(queue)
        markReleasing(records)
        return [.release(records)]
    }

    /// Only the connection that received an item can ACK it; an unknown or a second ACK does nothing.
    private mutating func acknowledged(connection: String, messageID: String, to: String?,
                                       _ now: Int64, _ rules: OutboundRules) -> [OutboundEffect] {
        guard let (key, sent, sender) = acknowledge(connectionID: connection, messageID: messageID, to: to) else { return [] }
        let r = sent.record
        releaseUpstreamID(of: r)
        var effects: [OutboundEffect] = r.aboutMessageID == nil ? [] : [.receiptAcked(r, connection: connection)]
        let removal = StoreOp.removeOutbound(senderID: r.senderID, kind: r.kind, token: r.token, messageID: r.messageID)
        if let write = takeLive(key) {
            // Called off in time: there is nothing to remove, and the device's `sent` is due now. Live
            // writes exist only outside a cluster (`upstreamAccepted`), so the removal needs no mark.
            effects.append(.callOffLiveWrite(write, answer: .sent(messageID: r.messageID), otherwise: [removal]))
        } else if rules.clustered {
            // Until the removal commits, the store still holds it: the admin view must not list it.
            markRemoving(key)
            effects.append(.write([removal], removing: key))
        } else {
            effects.append(.write([removal], removing: nil))
        }
        return effects + handOut(sender: sender, now, rules)
    }

    /// The mirror of a downstream message handed to an online device: the upstream message goes out
    /// now when its sender's queue is empty and a connection has room; no effects when it cannot
    /// (nothing was changed: the host writes it first, as every other upstream message). In a cluster
    /// never: another node may hold the sender's connections.
    private mutating func upstreamAccepted(_ record: OutboundRecord, _ now: Int64, _ rules: OutboundRules) -> [OutboundEffect] {
        guard !rules.clustered, isQueueEmpty(sender: record.senderID) else { return [] }
        append(record)
        let handed = dispatch(sender: record.senderID, window: rules.window, now: now)
        // No open connection had room: it was the only item, so nothing went out.
        guard isQueueEmpty(sender: record.senderID) else {
            _ = takeQueue(sender: record.senderID)
            return []
        }
        // The write goes to the store before the app server can see the message (so before its
        // ACK, and before the removal that an ACK after the write asks for).
        return [.writeLive(record, goLive(record.key)), .handOut(sender: record.senderID, handed)]
    }

    /// A record in the store joins its sender's queue and goes out if a window is free; the oldest
    /// past the sender's limit are dropped. In a cluster, with no open connection of its sender
    /// here, it is given up instead (to the other nodes, or for good when it expired).
    private mutating func committed(_ record: OutboundRecord, _ now: Int64, _ rules: OutboundRules) -> [OutboundEffect] {
        if rules.clustered && !hasOpenConnection(sender: record.senderID) {
            releaseUpstreamID(of: record)
            // Taken for its expiry (the cluster's sweep): given up here, as the tick would.
            if record.expiresAt <= now { return givenUp(record, .ttlExceeded) }
            // Another node may have a connection of the sender: it takes the item from the store.
            markReleasing([record])
            return [.release([record])]
        }
        append(record)
        var effects = handOut(sender: record.senderID, now, rules)
        let dropped = trim(sender: record.senderID, to: rules.maxPendingPerSender)
        guard !dropped.isEmpty else { return effects }
        for r in dropped { releaseUpstreamID(of: r) }
        effects.append(.queueFull(sender: record.senderID, count: dropped.count))
        for r in dropped { effects += givenUp(r, .tooManyMessages) }
        return effects
    }

    /// Drops what expired (the device hears `error`), and sends again what was not ACKed within the
    /// ACK timeout.
    private mutating func tick(_ now: Int64, _ rules: OutboundRules) -> [OutboundEffect] {
        var expired = expiredPending(now: now)
        let due = takeDueInFlight(now: now, ackTimeout: rules.ackTimeoutMillis)
        expired += due.expired
        for (sender, records) in due.timedOut { requeue(records, sender: sender) }
        for r in expired { releaseUpstreamID(of: r) }
        var effects = due.senders.flatMap { handOut(sender: $0, now, rules) }
        for r in expired { effects += givenUp(r, .ttlExceeded) }
        return effects
    }

    /// An item given up, out of the router's state already (its id released): a live write not taken
    /// yet is called off (it is never written, and the device hears only the error), then it is dropped.
    private mutating func givenUp(_ record: OutboundRecord, _ error: UpstreamError) -> [OutboundEffect] {
        (takeLive(record.key).map { [.callOff($0)] } ?? []) + [.drop(record, error)]
    }
}
