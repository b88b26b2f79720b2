import PushDomain

extension APNsNotification {
    /// The canonical message: the payload and Apple's headers as HTTP v1's `apns` block holds them
    /// (so the platforms' rendering can treat both alike; a payload passed on as sent is
    /// `apnsPayloadText` instead of `payload` there), priority 10 → high, 5 → normal, and the
    /// expiry as a time to live: 0 (or a time already past) is "now or never"; command 0 carries none
    /// and is kept as long as any message (four weeks, this emulator's ceiling for every API).
    public func message(nowMillis: Int64) -> Message {
        let timeToLive: Int
        switch expiry {
        case nil: timeToLive = Message.maximumTimeToLive
        case 0?: timeToLive = 0
        case let e?:
            let remaining = Int64(e) - nowMillis / 1000
            timeToLive = Int(max(0, min(Int64(Message.maximumTimeToLive), remaining)))
        }
        var headers: [String: JSONValue] = ["apns-priority": .string(String(priority))]
        if let expiry { headers["apns-expiration"] = .string(String(expiry)) }
        var apns: [String: JSONValue] = ["headers": .object(headers)]
        if let parsedPayload { apns["payload"] = parsedPayload }
        var message = Message(messageID: String(identifier), priority: priority == 10 ? .high : .normal,
                              timeToLive: timeToLive, apns: .object(apns))
        if parsedPayload == nil { message.apnsPayloadText = String(decoding: payload, as: UTF8.self) }
        return message
    }
}
