import PushDomain
import StoreModel

/// What the store keeps for a device: a message as the device will see it, and the notices the
/// service gives the device itself.
extension DeliveryCore {
    /// `from`: what the device sees as the sender (`/topics/T` for a topic message), default the sender ID.
    package static func queuedMessage(_ m: Message, token: String, app: String, senderID: String, from: String? = nil,
                              deviceMessageID: String, now: Int64) -> QueuedMessage {
        let isNotification = m.notification != nil
        let priority = m.effectivePriority
        // Notification messages are always collapsible: without a key, the app's package is the key.
        let collapseKey = m.collapseKey ?? (isNotification && !app.isEmpty ? app : nil)
        // Keys in sorted order, as JSONValue.encoded() would write them.
        var payload = JSONObjectWriter()
        if let ck = m.collapseKey { payload.add("collapse_key", ck) }
        if let ca = m.contentAvailable { payload.add("content_available", ca) }
        if let data = m.data { payload.add("data", stringMap: data) }
        payload.add("from", from ?? senderID)
        payload.add("message_id", deviceMessageID)
        if let mc = m.mutableContent { payload.add("mutable_content", mc) }
        if let n = m.notification { payload.add("notification", json: n) }
        payload.add("original_priority", priority.rawValue)
        payload.add("priority", priority.rawValue)
        payload.add("sent_time", now)
        payload.add("ttl", Int64(m.timeToLive))
        return QueuedMessage(token: token, deviceMessageID: deviceMessageID, senderID: senderID,
                             appMessageID: m.messageID, collapseKey: collapseKey, priority: priority.rawValue,
                             timeToLive: m.timeToLive, enqueuedAt: now,
                             expiresAt: now + Int64(m.timeToLive) * 1000,
                             deliveryReceiptRequested: m.deliveryReceiptRequested,
                             delayWhileIdle: m.delayWhileIdle, isNotification: isNotification,
                             payload: payload.finished(), platformBlocks: platformBlocks(m))
    }

    /// HTTP v1's platform blocks, kept with the stored message for the platform views
    /// (`PlatformRendering`), with the cross-platform `notification` / `data` where android changed them.
    package static func platformBlocks(_ m: Message) -> String? {
        var blocks: [String: JSONValue] = [:]
        if let android = m.android { blocks["android"] = android }
        if let apns = m.apns { blocks["apns"] = apns }
        if let webpush = m.webpush { blocks["webpush"] = webpush }
        if let shared = m.sharedNotification { blocks["notification"] = shared }
        if let shared = m.sharedData { blocks["data"] = .object(shared.mapValues { .string($0) }) }
        return blocks.isEmpty ? nil : JSONValue.object(blocks).encoded()
    }
}
