import PushDomain

/// JSON that CCS sends to an app server, compact and with keys in the order of Google's
/// documentation examples. The XML layer wraps it in `<gcm>` and escapes it.
public enum OutgoingJSON {
    /// `{"from":"REGID","message_id":"m-1","message_type":"ack"}`. `registrationID` is a
    /// canonical token the app server should switch to (rarely used).
    public static func ack(messageID: String, from: String?, registrationID: String? = nil) -> String {
        var writer = JSONObjectWriter()
        if let from { writer.add("from", from) }
        writer.add("message_id", messageID)
        writer.add("message_type", "ack")
        if let registrationID { writer.add("registration_id", registrationID) }
        return writer.finished()
    }

    /// The ACK for a message sent to a device group:
    /// `{"from":"aUniqueKey","message_type":"ack","success":1,"failure":2,"failed_registration_ids":[…],"message_id":"m-1"}`.
    /// `failed_registration_ids` is left out when empty.
    public static func deviceGroupAck(messageID: String, from: String, success: Int, failure: Int, failedRegistrationIDs: [String] = []) -> String {
        var writer = JSONObjectWriter()
        writer.add("from", from)
        writer.add("message_type", "ack")
        writer.add("success", success)
        writer.add("failure", failure)
        if !failedRegistrationIDs.isEmpty {
            writer.add("failed_registration_ids", json: .array(failedRegistrationIDs.map(JSONValue.string)))
        }
        writer.add("message_id", messageID)
        return writer.finished()
    }

    /// `{"message_type":"nack","message_id":…,"from":…,"error":…,"error_description":…}`;
    /// `from` is left out when nil.
    public static func nack(_ nack: Nack) -> String {
        var writer = JSONObjectWriter()
        writer.add("message_type", "nack")
        writer.add("message_id", nack.messageID)
        if let from = nack.from { writer.add("from", from) }
        writer.add("error", nack.code.rawValue)
        writer.add("error_description", nack.description)
        return writer.finished()
    }

    /// The NACK for a device-group message no member took: the usual NACK fields plus the counts
    /// and `failed_registration_ids` of the ACK, so that the app server learns which members failed
    /// (clients that do not know the extra fields ignore them).
    public static func deviceGroupNack(_ nack: Nack, success: Int, failure: Int, failedRegistrationIDs: [String]) -> String {
        var writer = JSONObjectWriter()
        writer.add("message_type", "nack")
        writer.add("message_id", nack.messageID)
        if let from = nack.from { writer.add("from", from) }
        writer.add("error", nack.code.rawValue)
        writer.add("error_description", nack.description)
        writer.add("success", success)
        writer.add("failure", failure)
        writer.add("failed_registration_ids", json: .array(failedRegistrationIDs.map(JSONValue.string)))
        return writer.finished()
    }

    public static let connectionDraining = #"{"message_type":"control","control_type":"CONNECTION_DRAINING"}"#
}

/// JSON an app server sends, for the emulator's own client tools (send, bench, conformance).
public enum AppServerJSON {
    /// `{"to":…,"message_id":…,"message_type":"ack"}` as in Google's documentation.
    public static func ack(messageID: String, to: String?) -> String {
        var writer = JSONObjectWriter()
        if let to { writer.add("to", to) }
        writer.add("message_id", messageID)
        writer.add("message_type", "ack")
        return writer.finished()
    }

    public static func downstream(_ message: DownstreamMessage) -> String {
        message.encodedJSON()
    }
}

/// What CCS sends to an app server, decoded (for client tools and tests).
public enum ConnectionServerMessage: Sendable, Equatable {
    case ack(messageID: String, from: String?, registrationID: String?)
    case nack(Nack)
    /// `control_type`, e.g. "CONNECTION_DRAINING".
    case control(String)
    case upstream(UpstreamMessage)
    case receipt(DeliveryReceipt)

    /// nil when the text is not one of the shapes above.
    public static func decode(_ gcmText: String) -> ConnectionServerMessage? {
        guard case .object(let object)? = try? JSONValue.parse(gcmText) else { return nil }
        let messageID = object["message_id"]?.stringValue
        switch object["message_type"]?.stringValue {
        case "ack"?:
            guard let messageID else { return nil }
            return .ack(messageID: messageID, from: object["from"]?.stringValue,
                        registrationID: object["registration_id"]?.stringValue)
        case "nack"?:
            guard let messageID, let error = object["error"]?.stringValue,
                  let code = NackCode(rawValue: error) else { return nil }
            return .nack(Nack(messageID: messageID, from: object["from"]?.stringValue, code: code,
                              description: object["error_description"]?.stringValue ?? ""))
        case "control"?:
            return object["control_type"]?.stringValue.map(ConnectionServerMessage.control)
        case "receipt"?:
            guard let messageID, let data = object["data"]?.objectValue,
                  let original = data["original_message_id"]?.stringValue,
                  let device = data["device_registration_id"]?.stringValue else { return nil }
            let timestamp = data["message_sent_timestamp"].flatMap { value -> Int64? in
                value.intValue ?? value.stringValue.flatMap { Int64($0) }
            }
            return .receipt(DeliveryReceipt(
                category: object["category"]?.stringValue, messageID: messageID,
                messageStatus: data["message_status"]?.stringValue ?? "",
                originalMessageID: original, deviceRegistrationID: device,
                sentTimestampMillis: timestamp))
        case nil:
            guard let messageID, let from = object["from"]?.stringValue,
                  let category = object["category"]?.stringValue else { return nil }
            var data: [String: String] = [:]
            for (key, value) in object["data"]?.objectValue ?? [:] {
                data[key] = DownstreamMessage.stringified(value)
            }
            return .upstream(UpstreamMessage(
                category: category, data: data, messageID: messageID, from: from,
                timeToLive: object["time_to_live"]?.intValue.map { Int($0) }))
        default:
            return nil
        }
    }
}
