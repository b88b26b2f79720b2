import PushDomain

extension ProviderNotification {
    /// The canonical message: the payload and Apple's headers in HTTP v1's `apns` block (as the
    /// binary gateway does), priority 10 → high, 5 and 1 → normal, `apns-expiration` as a time to live
    /// (0, or a time already past: now or never; none: as long as any message is kept).
    public func message(nowMillis: Int64) -> Message {
        let timeToLive: Int
        switch expiration {
        case nil: timeToLive = Message.maximumTimeToLive
        case 0?: timeToLive = 0
        case let e?: timeToLive = Int(max(0, min(Int64(Message.maximumTimeToLive), e - nowMillis / 1000)))
        }
        var headers: [String: JSONValue] = ["apns-priority": .string(String(priority)), "apns-id": .string(apnsID),
                                            "apns-push-type": .string(pushType.rawValue), "apns-topic": .string(topic)]
        if let expiration { headers["apns-expiration"] = .string(String(expiration)) }
        if let collapseID { headers["apns-collapse-id"] = .string(collapseID) }
        // The payload goes to the device byte for byte, as APNs passes it on, when it can be embedded
        // as it is (`JSONText`); otherwise encoded anew from what the validator parsed.
        let embeddable = parsedPayload == nil || JSONText.isEmbeddableObject(payload, withObjectAt: "aps")
        var apns: [String: JSONValue] = ["headers": .object(headers)]
        if !embeddable { apns["payload"] = parsedPayload }
        var message = Message(messageID: apnsID, priority: priority == 10 ? .high : .normal,
                              timeToLive: timeToLive, apns: .object(apns))
        if embeddable { message.apnsPayloadText = String(decoding: payload, as: UTF8.self) }
        return message
    }
}
