import PushDomain

/// The device channel's upstream message in CCS JSON: the object inside the device's `<gcm>` read
/// into the request the engine takes, and the engine's answer written as the JSON the device
/// receives (`{"message_type":"sent"|"send_error",…}`, docs/device-protocol.md).
enum DeviceUpstream {
    /// A message the device channel refuses before the engine sees it.
    struct Refusal: Error, Equatable {
        var messageID: String
        var error: UpstreamError
    }

    /// The request, or why it is refused: no usable `message_id`, no `to`, or a `time_to_live`
    /// outside 0…4 weeks.
    static func request(from object: [String: JSONValue]) -> Result<UpstreamRequest, Refusal> {
        let messageID: String
        switch object["message_id"] {
        case .string(let s)? where !s.isEmpty: messageID = s
        case .int(let n)?: messageID = String(n)
        default: return .failure(Refusal(messageID: "", error: .missingMessageID))
        }
        guard case .string(let to)? = object["to"] else {
            return .failure(Refusal(messageID: messageID, error: .missingTo))
        }
        var timeToLive: Int?
        if let ttlValue = object["time_to_live"], !ttlValue.isNull {
            guard let ttl = ttlValue.intValue, (0...Int64(Message.maximumTimeToLive)).contains(ttl) else {
                return .failure(Refusal(messageID: messageID, error: .invalidTTL))
            }
            timeToLive = Int(ttl)
        }
        // As the client library does: only string values travel.
        var data: [String: String] = [:]
        for (k, v) in object["data"]?.objectValue ?? [:] { if case .string(let s) = v { data[k] = s } }
        return .success(UpstreamRequest(messageID: messageID, to: to, timeToLive: timeToLive, data: data))
    }

    /// `{"message_id":…,"message_type":"sent"}` or `{"error":…,"message_id":…,"message_type":"send_error"}`
    /// (keys sorted): the device's `onMessageSent` / `onSendError`.
    static func answer(_ outcome: UpstreamOutcome) -> String {
        switch outcome {
        case .sent(let id):
            return JSONValue.object(["message_type": .string("sent"), "message_id": .string(id)]).encoded()
        case .sendError(let id, let error):
            return JSONValue.object(["message_type": .string("send_error"), "message_id": .string(id),
                                     "error": .string(error.rawValue)]).encoded()
        }
    }
}
