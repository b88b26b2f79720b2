import PushDomain

/// The queue's rules, as the SQL backends apply them inside their write transaction (FCM's storage
/// limits: docs/semantics.md).
extension InMemoryTables {
    mutating func enqueue(_ m: QueuedMessage, limits: QueueLimits?, removals: inout [QueueRemoval]) throws {
        guard devices[m.token] != nil else { throw UnknownDevice(token: m.token) }
        if let key = m.collapseKey { collapse(m.token, key: key, kinds: [.message, .apnsNotification], removals: &removals) }
        guard let limits else { return try insert(m) }
        guard m.collapseKey != nil else {
            if nonCollapsibleCount(m.token) >= limits.maxNonCollapsible {
                // The new message goes with the stored ones (the device gets the notice instead).
                removals.append(QueueRemoval(token: m.token, deviceMessageID: m.deviceMessageID, reason: .discarded,
                                             senderID: m.senderID, onArrival: true))
                return try overflow(m.token, notice: limits.overflowNotice, removals: &removals)
            }
            return try insert(m)
        }
        try insert(m)
        trimCollapseKeys(m.token, keeping: limits.maxCollapseKeys, kinds: [.message, .apnsNotification], removals: &removals)
    }

    /// Stores one message. An app server's message under an id the device already holds is refused,
    /// never put in the other's place; the service's own notices replace theirs.
    mutating func insert(_ m: QueuedMessage) throws {
        var queue = queues[m.token] ?? []
        if let at = queue.firstIndex(where: { $0.message.deviceMessageID == m.deviceMessageID }) {
            guard !m.kind.isMinted else {
                throw ConstraintViolation(description: "UNIQUE constraint failed: queued_message.device_key, queued_message.device_message_id")
            }
            queue.remove(at: at)
        }
        queue.append(Queued(seq: seq(), message: m))
        queues[m.token] = queue
    }

    func nonCollapsibleCount(_ token: String) -> Int {
        queues[token]?.count { $0.message.collapseKey == nil && $0.message.kind == .message } ?? 0
    }

    /// Drops the device's stored messages with this collapse key (a newer one replaces them).
    mutating func collapse(_ token: String, key: String, kinds: Set<MessageKind>, removals: inout [QueueRemoval]) {
        remove(from: token, as: .collapsed, removals: &removals) { $0.collapseKey == key && kinds.contains($0.kind) }
    }

    /// All the device's messages without a key go, and the deleted-messages notice takes their
    /// place (once).
    mutating func overflow(_ token: String, notice: QueuedMessage, removals: inout [QueueRemoval]) throws {
        remove(from: token, as: .discarded, removals: &removals) { $0.collapseKey == nil && $0.kind == .message }
        if !(queues[token] ?? []).contains(where: { $0.message.kind == .deletedMessages }) {
            var notice = notice
            notice.token = token
            try insert(notice)
        }
    }

    /// FCM keeps at most `keeping` collapse keys per device: the oldest keys' messages go.
    mutating func trimCollapseKeys(_ token: String, keeping: Int, kinds: Set<MessageKind>, removals: inout [QueueRemoval]) {
        var firstSeen: [String: Int64] = [:]
        for q in queues[token] ?? [] where kinds.contains(q.message.kind) {
            guard let key = q.message.collapseKey else { continue }
            firstSeen[key] = min(firstSeen[key] ?? q.seq, q.seq)
        }
        let oldestFirst = firstSeen.sorted { $0.value < $1.value }.map(\.key)
        for key in oldestFirst.dropLast(keeping) { collapse(token, key: key, kinds: kinds, removals: &removals) }
    }

    /// Removes the messages that match, noting an app server's ones (not the service's notices).
    mutating func remove(from token: String, as reason: QueueRemoval.Reason, removals: inout [QueueRemoval],
                         where matches: (QueuedMessage) -> Bool) {
        guard var queue = queues[token] else { return }
        queue.removeAll { q in
            guard matches(q.message) else { return false }
            if q.message.kind.isMinted {
                removals.append(QueueRemoval(token: token, deviceMessageID: q.message.deviceMessageID, reason: reason,
                                             senderID: q.message.senderID))
            }
            return true
        }
        queues[token] = queue.isEmpty ? nil : queue
    }

    /// A topic or condition message for its whole audience, with `enqueue`'s per-device rules; a
    /// device already holding the id refuses the whole fan-out.
    mutating func fanOut(_ f: FanOut, removals: inout [QueueRemoval]) throws {
        var audience: [String]
        switch f.audience {
        case .subscribers(let sender, let topic):
            audience = subscriptions.keys.filter { $0.senderID == sender && $0.topic == topic }.map(\.token)
        case .tokens(let tokens):
            audience = Array(Set(tokens.filter { devices[$0] != nil }))
        }
        audience.sort { (deviceKeys[$0] ?? 0) < (deviceKeys[$1] ?? 0) }
        let collapsible = f.collapseKeyIsApp || f.message.collapseKey != nil
        for token in audience {
            var m = f.message
            m.token = token
            if f.collapseKeyIsApp { m.collapseKey = devices[token]?.app }
            if let key = m.collapseKey { collapse(token, key: key, kinds: [.message], removals: &removals) }
            if !collapsible, nonCollapsibleCount(token) >= f.limits.maxNonCollapsible {
                try overflow(token, notice: f.limits.overflowNotice, removals: &removals)
                continue
            }
            try insert(m)
            if collapsible { trimCollapseKeys(token, keeping: f.limits.maxCollapseKeys, kinds: [.message], removals: &removals) }
        }
    }
}

extension MessageKind {
    /// An app server's message (FCM or APNs), as opposed to a notice the service makes itself.
    var isMinted: Bool { self == .message || self == .apnsNotification }
}
