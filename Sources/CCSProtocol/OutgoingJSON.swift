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

    /// `{"category":…,"data":{…},"message_id":…,"from":…}` plus `"time_to_live"` when given.
    /// Data keys are sorted. A message the device addressed to a device group also carries
    /// `"to"` (the key as the device wrote it) and `"notification_key_name"`: a group has many valid
    /// key encodings, so the name is what an app server can match against what it stored.
    public static func upstream(category: String, data: [String: String], messageID: String, from: String, timeToLive: Int?,
                                group: (key: String, name: String)? = nil) -> String {
        var writer = JSONObjectWriter()
        writer.add("category", category)
        writer.add("data", stringMap: data)
        writer.add("message_id", messageID)
        writer.add("from", from)
        if let timeToLive { writer.add("time_to_live", timeToLive) }
        if let group {
            writer.add("to", group.key)
            writer.add("notification_key_name", group.name)
        }
        return writer.finished()
    }

    public static func upstream(_ message: UpstreamMessage) -> String {
        upstream(category: message.category, data: message.data, messageID: message.messageID,
                 from: message.from, timeToLive: message.timeToLive)
    }

    /// A delivery receipt:
    /// `{"category":…,"data":{"message_status":"MESSAGE_SENT_TO_DEVICE","original_message_id":…,"device_registration_id":…,"message_sent_timestamp":"<ms>"},"message_id":"dr2:<orig>","message_type":"receipt","from":"gcm.googleapis.com"}`.
    /// `category` is left out when nil.
    public static func receipt(category: String?, originalMessageID: String, deviceRegistrationID: String, sentTimestampMillis: Int64) -> String {
        var data = JSONObjectWriter()
        data.add("message_status", DeliveryReceipt.messageSentToDevice)
        data.add("original_message_id", originalMessageID)
        data.add("device_registration_id", deviceRegistrationID)
        data.add("message_sent_timestamp", String(sentTimestampMillis))
        var writer = JSONObjectWriter()
        if let category { writer.add("category", category) }
        writer.add("data", rawJSON: data.finished())
        writer.add("message_id", DeliveryReceipt.messageIDPrefix + originalMessageID)
        writer.add("message_type", "receipt")
        writer.add("from", DeliveryReceipt.sender)
        return writer.finished()
    }
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

/// An upstream message (device → app server) as CCS forwards it.
public struct UpstreamMessage: Sendable, Equatable {
    /// The app's package name.
    public var category: String
    public var data: [String: String]
    public var messageID: String
    /// The sending device's registration token.
    public var from: String
    public var timeToLive: Int?

    public init(category: String, data: [String: String], messageID: String, from: String, timeToLive: Int? = nil) {
        self.category = category
        self.data = data
        self.messageID = messageID
        self.from = from
        self.timeToLive = timeToLive
    }
}

public struct DeliveryReceipt: Sendable, Equatable {
    public static let messageIDPrefix = "dr2:"
    public static let sender = "gcm.googleapis.com"
    public static let messageSentToDevice = "MESSAGE_SENT_TO_DEVICE"

    public var category: String?
    /// `dr2:` + the original message id.
    public var messageID: String
    public var messageStatus: String
    public var originalMessageID: String
    public var deviceRegistrationID: String
    public var sentTimestampMillis: Int64?

    public init(category: String?, messageID: String, messageStatus: String, originalMessageID: String,
                deviceRegistrationID: String, sentTimestampMillis: Int64?) {
        self.category = category
        self.messageID = messageID
        self.messageStatus = messageStatus
        self.originalMessageID = originalMessageID
        self.deviceRegistrationID = deviceRegistrationID
        self.sentTimestampMillis = sentTimestampMillis
    }

    /// The original message id an app server's ACK refers to, whether or not it kept the `dr2:` prefix.
    public static func originalMessageID(fromAck messageID: String) -> String {
        messageID.hasPrefix(messageIDPrefix) ? String(messageID.dropFirst(messageIDPrefix.count)) : messageID
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
