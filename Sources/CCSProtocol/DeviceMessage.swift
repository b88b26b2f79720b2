/// The message a simulated Android app sees: the fields FCM's `RemoteMessage` exposes.
public struct DeviceMessage: Sendable, Equatable {
    /// `DeviceMessageID` form, e.g. `0:1587579700287156%a62f20e7a62f20e7`.
    public var messageID: String
    /// The sender ID, or `/topics/<name>` for topic messages (as `RemoteMessage.getFrom()`).
    public var from: String
    public var senderID: String
    /// nil for ordinary messages; "deleted_messages", "send_event" or "send_error" otherwise.
    public var messageType: String?
    public var collapseKey: String?
    public var data: [String: String]
    public var notification: JSONValue?
    public var sentTimeMillis: Int64
    /// Seconds.
    public var ttl: Int
    /// What the app server asked for (after defaults).
    public var originalPriority: Priority
    /// What the device got (may be lowered, e.g. by doze policy).
    public var priority: Priority

    public init(messageID: String, from: String, senderID: String, messageType: String? = nil,
                collapseKey: String? = nil, data: [String: String] = [:], notification: JSONValue? = nil,
                sentTimeMillis: Int64, ttl: Int, originalPriority: Priority, priority: Priority) {
        self.messageID = messageID
        self.from = from
        self.senderID = senderID
        self.messageType = messageType
        self.collapseKey = collapseKey
        self.data = data
        self.notification = notification
        self.sentTimeMillis = sentTimeMillis
        self.ttl = ttl
        self.originalPriority = originalPriority
        self.priority = priority
    }

    /// The device's view of a downstream message. `from` is the topic for topic sends,
    /// else the sender ID.
    public init(downstream: DownstreamMessage, messageID: String, senderID: String,
                sentTimeMillis: Int64, deliveredPriority: Priority? = nil) {
        let from: String
        if case .topic? = downstream.target, let to = downstream.to {
            from = to
        } else {
            from = senderID
        }
        self.init(messageID: messageID, from: from, senderID: senderID,
                  collapseKey: downstream.collapseKey, data: downstream.data ?? [:],
                  notification: downstream.notification, sentTimeMillis: sentTimeMillis,
                  ttl: downstream.timeToLive, originalPriority: downstream.effectivePriority,
                  priority: deliveredPriority ?? downstream.effectivePriority)
    }

    /// The "deleted messages" notice a device gets after its stored messages were dropped
    /// (more than 100 pending), which Android reports as `onDeletedMessages()`.
    public static func deletedMessages(messageID: String, senderID: String, sentTimeMillis: Int64) -> DeviceMessage {
        DeviceMessage(messageID: messageID, from: senderID, senderID: senderID, messageType: "deleted_messages",
                      sentTimeMillis: sentTimeMillis, ttl: 0, originalPriority: .normal, priority: .normal)
    }

    public func encodedJSON() -> String {
        var writer = JSONObjectWriter()
        writer.add("message_id", messageID)
        writer.add("from", from)
        writer.add("sender_id", senderID)
        if let messageType { writer.add("message_type", messageType) }
        if let collapseKey { writer.add("collapse_key", collapseKey) }
        writer.add("data", stringMap: data)
        if let notification { writer.add("notification", json: notification) }
        writer.add("sent_time", sentTimeMillis)
        writer.add("ttl", ttl)
        writer.add("original_priority", originalPriority.rawValue)
        writer.add("priority", priority.rawValue)
        return writer.text
    }

    /// Inverse of `encodedJSON()`; nil if a required field is missing or mistyped.
    public static func decode(_ text: String) -> DeviceMessage? {
        guard case .object(let object)? = try? JSONValue.parse(text),
              let messageID = object["message_id"]?.stringValue,
              let from = object["from"]?.stringValue,
              let senderID = object["sender_id"]?.stringValue,
              let sentTime = object["sent_time"]?.intValue,
              let ttl = object["ttl"]?.intValue,
              let original = object["original_priority"]?.stringValue.flatMap(Priority.init(rawValue:)),
              let priority = object["priority"]?.stringValue.flatMap(Priority.init(rawValue:))
        else { return nil }
        var data: [String: String] = [:]
        for (key, value) in object["data"]?.objectValue ?? [:] {
            data[key] = DownstreamMessage.stringified(value)
        }
        let notification = object["notification"].flatMap { $0.isNull ? nil : $0 }
        return DeviceMessage(messageID: messageID, from: from, senderID: senderID,
                             messageType: object["message_type"]?.stringValue,
                             collapseKey: object["collapse_key"]?.stringValue, data: data,
                             notification: notification, sentTimeMillis: sentTime, ttl: Int(ttl),
                             originalPriority: original, priority: priority)
    }
}
