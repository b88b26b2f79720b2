import PushDomain

/// The store's tables as values, with the same rules as the SQLite and PostgreSQL backends (FCM's
/// queue limits, collapse, the deleted-messages notice, fan-out, removals): what `InMemoryStore`
/// keeps. A transaction is a copy of this value that is kept only when every op succeeded.
struct InMemoryTables {
    /// A queued message with its place in arrival order (the backends' `seq`).
    struct Queued {
        var seq: Int64
        var message: QueuedMessage
    }

    struct OutboundKey: Hashable {
        var senderID: String, kind: OutboundKind, token: String, messageID: String
    }

    struct Subscription: Hashable {
        var senderID: String, topic: String, token: String
    }

    var senders: [String: SenderRecord] = [:]
    var devices: [String: DeviceRecord] = [:]
    /// Each device's number (`device_key`): the order fan-outs walk their audience in.
    var deviceKeys: [String: Int64] = [:]
    var queues: [String: [Queued]] = [:]
    var outbound: [OutboundKey: (seq: Int64, record: OutboundRecord)] = [:]
    var trays: [String: [(seq: Int64, entry: TrayEntry)]] = [:]
    var subscriptions: [Subscription: Int64] = [:]
    var groups: [String: DeviceGroupRecord] = [:]
    var feedback: [String: [String: Int64]] = [:]
    var meta: [String: String] = [:]
    var nextSeq: Int64 = 1

    mutating func seq() -> Int64 {
        defer { nextSeq += 1 }
        return nextSeq
    }

    /// What a unique index refuses, in the backends' terms.
    struct ConstraintViolation: Error, CustomStringConvertible {
        var description: String
    }

    // MARK: ops

    mutating func apply(_ op: StoreOp, removals: inout [QueueRemoval]) throws {
        switch op {
        case .upsertSender(let s):
            let createdAt = senders[s.senderID]?.createdAt ?? s.createdAt
            senders[s.senderID] = SenderRecord(senderID: s.senderID, serverKey: s.serverKey, createdAt: createdAt)
        case .upsertDevice(let d):
            try upsert(d)
        case .enqueue(let m, let limits):
            try enqueue(m, limits: limits, removals: &removals)
        case .removeMessage(let token, let id):
            queues[token]?.removeAll { $0.message.deviceMessageID == id }
        case .removeAllMessages(let token):
            queues[token] = nil
        case .collapse(let token, let key):
            if devices[token] != nil { collapse(token, key: key, kinds: [.message, .apnsNotification], removals: &removals) }
        case .removeExpired(let now):
            for token in Array(queues.keys) {
                remove(from: token, as: .expired, removals: &removals) { $0.expiresAt <= now }
            }
        case .addOutbound(let o):
            outbound[OutboundKey(senderID: o.senderID, kind: o.kind, token: o.token, messageID: o.messageID)] = (seq(), o)
        case .removeOutbound(let sender, let kind, let token, let id):
            outbound[OutboundKey(senderID: sender, kind: kind, token: token, messageID: id)] = nil
        case .addToTray(let t):
            trays[t.token, default: []].removeAll { $0.entry.deviceMessageID == t.deviceMessageID }
            trays[t.token, default: []].append((seq(), t))
        case .removeFromTray(let token, let id):
            trays[token]?.removeAll { $0.entry.deviceMessageID == id }
        case .clearTray(let token):
            trays[token] = nil
        case .setMeta(let key, let value):
            meta[key] = value
        case .upsertDeviceGroup(let g):
            try upsert(g)
        case .removeDeviceGroup(let id):
            groups[id] = nil
        case .removeAllDevices:
            (devices, deviceKeys, queues, outbound, trays, subscriptions, groups, feedback) = ([:], [:], [:], [:], [:], [:], [:], [:])
        case .removeSenderData(let sender):
            removeSenderData(sender)
        case .subscribe(let list):
            for t in list where devices[t.token] != nil {
                let key = Subscription(senderID: t.senderID, topic: t.topic, token: t.token)
                if subscriptions[key] == nil { subscriptions[key] = t.addedAt }
            }
        case .unsubscribe(let sender, let topic, let tokens):
            for token in tokens { subscriptions[Subscription(senderID: sender, topic: topic, token: token)] = nil }
        case .removeSubscriptions(let token):
            subscriptions = subscriptions.filter { $0.key.token != token }
        case .fanOut(let f):
            try fanOut(f, removals: &removals)
        case .addAPNsFeedback(let f):
            feedback[f.bundleID, default: [:]][f.deviceToken] = f.timestamp
        case .removeAPNsFeedback(let read):
            for f in read where (feedback[f.bundleID]?[f.deviceToken]).map({ $0 <= f.timestamp }) == true {
                feedback[f.bundleID]?[f.deviceToken] = nil
            }
        case .removeAPNsFeedbackToken(let bundleID, let token):
            feedback[bundleID]?[token] = nil
        }
    }

    mutating func upsert(_ d: DeviceRecord) throws {
        if devices[d.token] == nil, let other = devices.values.first(where: { $0.deviceID == d.deviceID }) {
            throw ConstraintViolation(description: "UNIQUE constraint failed: device.device_id (held by \(other.token))")
        }
        var record = d
        if let old = devices[d.token] {
            // The device's id and registration time are its own from the first insert.
            (record.deviceID, record.createdAt) = (old.deviceID, old.createdAt)
        } else {
            deviceKeys[d.token] = (deviceKeys.values.max() ?? 0) + 1
        }
        devices[d.token] = record
    }

    mutating func upsert(_ g: DeviceGroupRecord) throws {
        let sender = groups[g.id]?.senderID ?? g.senderID
        if groups.values.contains(where: { $0.senderID == sender && $0.name == g.name && $0.id != g.id }) {
            throw ConstraintViolation(description: "UNIQUE constraint failed: device_group.sender_id, device_group.name")
        }
        var record = g
        if let old = groups[g.id] { (record.senderID, record.createdAt) = (old.senderID, old.createdAt) }
        groups[g.id] = record
    }

    /// Everything of one sender: its queued messages, outbound, subscriptions and groups, and the
    /// devices registered to it alone (with their queues, trays and subscriptions).
    mutating func removeSenderData(_ sender: String) {
        for token in Array(queues.keys) { queues[token]?.removeAll { $0.message.senderID == sender } }
        outbound = outbound.filter { $0.key.senderID != sender }
        subscriptions = subscriptions.filter { $0.key.senderID != sender }
        groups = groups.filter { $0.value.senderID != sender }
        for (token, device) in devices where device.senders == [sender] {
            (devices[token], deviceKeys[token], queues[token], trays[token]) = (nil, nil, nil, nil)
            subscriptions = subscriptions.filter { $0.key.token != token }
        }
    }
}
