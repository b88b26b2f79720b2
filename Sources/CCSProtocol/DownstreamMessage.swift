import PushDomain

/// A downstream message (app server → device) after validation.
public struct DownstreamMessage: Sendable, Equatable {
    /// Four weeks: the default and the maximum `time_to_live`.
    public static let maximumTimeToLive = Message.maximumTimeToLive
    /// Limit on `dataBytes`.
    public static let maximumPayloadBytes = 4096

    /// Registration token, notification key, or `/topics/<name>`.
    public var to: String?
    public var condition: String?
    public var messageID: String
    public var collapseKey: String?
    /// nil = not given; see `effectivePriority`.
    public var priority: Priority?
    public var contentAvailable: Bool?
    public var mutableContent: Bool?
    /// Seconds; `maximumTimeToLive` when not given.
    public var timeToLive: Int
    public var timeToLiveGiven: Bool
    public var delayWhileIdle: Bool
    public var deliveryReceiptRequested: Bool
    public var dryRun: Bool
    /// Values as strings: non-string JSON values are replaced by their compact JSON text.
    public var data: [String: String]?
    /// The `notification` object as sent.
    public var notification: JSONValue?
    /// UTF-8 bytes of data keys and values plus notification keys and values (see
    /// `payloadBytes(data:notification:)`), counted against `maximumPayloadBytes`.
    public var dataBytes: Int

    public init(
        to: String? = nil,
        condition: String? = nil,
        messageID: String,
        collapseKey: String? = nil,
        priority: Priority? = nil,
        contentAvailable: Bool? = nil,
        mutableContent: Bool? = nil,
        timeToLive: Int? = nil,
        delayWhileIdle: Bool = false,
        deliveryReceiptRequested: Bool = false,
        dryRun: Bool = false,
        data: [String: String]? = nil,
        notification: JSONValue? = nil
    ) {
        self.to = to
        self.condition = condition
        self.messageID = messageID
        self.collapseKey = collapseKey
        self.priority = priority
        self.contentAvailable = contentAvailable
        self.mutableContent = mutableContent
        self.timeToLive = timeToLive ?? Self.maximumTimeToLive
        self.timeToLiveGiven = timeToLive != nil
        self.delayWhileIdle = delayWhileIdle
        self.deliveryReceiptRequested = deliveryReceiptRequested
        self.dryRun = dryRun
        self.data = data
        self.notification = notification
        self.dataBytes = Self.payloadBytes(data: data, notification: notification)
    }

    /// Notification messages default to high priority, data messages to normal.
    public var effectivePriority: Priority {
        priority ?? (notification != nil ? .high : .normal)
    }

    /// Where the message goes.
    public var target: DownstreamTarget? {
        if let to {
            if to.hasPrefix(DownstreamTarget.topicPrefix) {
                return .topic(String(to.dropFirst(DownstreamTarget.topicPrefix.count)))
            }
            return .registration(to)
        }
        if let condition, let parsed = try? TopicCondition.parse(condition) {
            return .condition(parsed)
        }
        return nil
    }

    /// The bytes counted against the 4096-byte limit: for every `data` entry its key plus its
    /// (stringified) value, and for every top-level `notification` entry its key plus its value
    /// (strings as they are, anything else as compact JSON text).
    public static func payloadBytes(data: [String: String]?, notification: JSONValue?) -> Int {
        var total = 0
        for (key, value) in data ?? [:] {
            total += key.utf8.count + value.utf8.count
        }
        if case .object(let object)? = notification {
            for (key, value) in object {
                total += key.utf8.count + stringified(value).utf8.count
            }
        }
        return total
    }

    /// A data value as the device sees it: strings unchanged, anything else its compact JSON text.
    public static func stringified(_ value: JSONValue) -> String {
        if case .string(let string) = value { return string }
        return value.encoded()
    }

    /// This message as downstream JSON an app server would send. Decoding the result with
    /// `AppServerStanzaDecoder` gives back an equal message, so it also serves as a storage form.
    public func encodedJSON() -> String {
        var writer = JSONObjectWriter()
        if let to { writer.add("to", to) }
        if let condition { writer.add("condition", condition) }
        writer.add("message_id", messageID)
        if let collapseKey { writer.add("collapse_key", collapseKey) }
        if let priority { writer.add("priority", priority.rawValue) }
        if let contentAvailable { writer.add("content_available", contentAvailable) }
        if let mutableContent { writer.add("mutable_content", mutableContent) }
        if timeToLiveGiven { writer.add("time_to_live", timeToLive) }
        if delayWhileIdle { writer.add("delay_while_idle", true) }
        if deliveryReceiptRequested { writer.add("delivery_receipt_requested", true) }
        if dryRun { writer.add("dry_run", true) }
        if let data { writer.add("data", stringMap: data) }
        if let notification { writer.add("notification", json: notification) }
        return writer.finished()
    }
}

extension DownstreamMessage {
    /// The message as the engine holds it, whichever API it came in through.
    public var canonical: Message {
        Message(messageID: messageID, collapseKey: collapseKey, priority: priority, contentAvailable: contentAvailable,
                mutableContent: mutableContent, timeToLive: timeToLive, delayWhileIdle: delayWhileIdle,
                deliveryReceiptRequested: deliveryReceiptRequested, dryRun: dryRun, data: data, notification: notification)
    }

    /// Where it goes: `to` (a token, or `/topics/…`) or `condition`. A notification key cannot be
    /// told from a token by its form: it is a `.token` here and the engine tells them apart.
    public var canonicalTarget: Target {
        if let to {
            if to.hasPrefix(DownstreamTarget.topicPrefix) { return .topic(String(to.dropFirst(DownstreamTarget.topicPrefix.count))) }
            return .token(to)
        }
        return .condition(condition ?? "")
    }
}

public enum DownstreamTarget: Sendable, Equatable {
    public static let topicPrefix = TopicName.prefix
    /// FCM's longest topic name.
    public static let maximumTopicNameLength = TopicName.maximumLength

    /// True for a bare topic name (without `/topics/`): `[a-zA-Z0-9-_.~%]{1,900}`.
    public static func isValidTopicName<S: StringProtocol>(_ name: S) -> Bool { TopicName.isValid(name) }

    /// A registration token or a device group's notification key (the engine tells them apart).
    case registration(String)
    /// A topic name, without the `/topics/` prefix.
    case topic(String)
    case condition(TopicCondition)
}

/// The Java type names CCS used in `JSON_TYPE_ERROR` texts.
public enum ExpectedJSONType: String, Sendable {
    case number = "java.lang.Number"
    case boolean = "java.lang.Boolean"
    case string = "java.lang.String"
    case object = "java.lang.Object"
}

/// Why a downstream message was refused. Over XMPP every case is a NACK `INVALID_JSON` whose
/// `error_description` is `errorDescription`; the legacy HTTP API can use `legacyHTTPError`.
public enum DownstreamValidationError: Error, Sendable, Equatable {
    /// A field has the wrong JSON type. `value` is how the client's value is shown in the text.
    case fieldType(field: String, expected: ExpectedJSONType, value: String)
    /// Neither `to` nor `condition`.
    case missingRegistration
    /// Both `to` and `condition`.
    case conflictingTargets
    case invalidTimeToLive(value: String)
    case invalidPriority(value: String)
    /// `to` starts with `/topics/` but the name is not `[a-zA-Z0-9-_.~%]+`.
    case invalidTopic(String)
    case invalidCondition(condition: String, reason: String)
    case invalidDataKey(String)
    case messageTooBig(bytes: Int)

    public var subcode: String {
        switch self {
        case .fieldType: return "JSON_TYPE_ERROR"
        case .missingRegistration: return "MISSING_REGISTRATION"
        case .conflictingTargets, .invalidPriority, .invalidTopic, .invalidCondition: return "INVALID_PARAMETERS"
        case .invalidTimeToLive: return "INVALID_TTL"
        case .invalidDataKey: return "INVALID_DATA_KEY"
        case .messageTooBig: return "MESSAGE_TOO_BIG"
        }
    }

    public var text: String {
        switch self {
        case .fieldType(let field, let expected, let value):
            return "Field \"\(field)\" must be a JSON \(expected.rawValue): \(value)"
        case .missingRegistration:
            return "Missing \"to\" or \"condition\" field"
        case .conflictingTargets:
            return "Only one of \"to\" or \"condition\" may be given"
        case .invalidTimeToLive(let value):
            return "Invalid value (\(value)) for \"time_to_live\": must be between 0 and \"\(DownstreamMessage.maximumTimeToLive)\""
        case .invalidPriority(let value):
            return "Invalid value (\(value)) for \"priority\": must be \"normal\" or \"high\""
        case .invalidTopic(let to):
            return "Invalid topic name in \"to\": \(to)"
        case .invalidCondition(let condition, let reason):
            return "Invalid \"condition\" (\(reason)): \(condition)"
        case .invalidDataKey(let key):
            return "Invalid data key \"\(key)\": keys \"from\", \"message_type\" and keys starting with \"google\" or \"gcm.notification.\" are reserved"
        case .messageTooBig(let bytes):
            return "Message too big: payload is \(bytes) bytes, the limit is \(DownstreamMessage.maximumPayloadBytes)"
        }
    }

    /// `InvalidJson: SUBCODE : text`, the NACK's `error_description`.
    public var errorDescription: String { "InvalidJson: \(subcode) : \(text)" }

    /// The legacy HTTP API's error name, or nil where that API answered HTTP 400 with `text`.
    public var legacyHTTPError: String? {
        switch self {
        case .fieldType: return nil
        case .missingRegistration: return "MissingRegistration"
        case .conflictingTargets, .invalidPriority, .invalidTopic, .invalidCondition: return "InvalidParameters"
        case .invalidTimeToLive: return "InvalidTtl"
        case .invalidDataKey: return "InvalidDataKey"
        case .messageTooBig: return "MessageTooBig"
        }
    }
}

// MARK: - Validation

extension DownstreamMessage {
    /// Reserved `data` keys: exact names, and prefixes.
    public static let reservedDataKeys: Set<String> = ["from", "message_type"]
    public static let reservedDataKeyPrefixes = ["google", "gcm.notification."]

    public static func isReservedDataKey(_ key: String) -> Bool {
        reservedDataKeys.contains(key) || reservedDataKeyPrefixes.contains { key.hasPrefix($0) }
    }

    /// Validates the fields of a downstream JSON object (everything except `message_id` and
    /// `message_type`, which the caller has dealt with). Unknown fields are ignored.
    ///
    /// Checks run in this order, and the first failure is reported: types of `to`/`condition`,
    /// presence of a target, types of the other fields, `time_to_live` range, `priority` value,
    /// topic name / condition syntax, reserved data keys, payload size.
    public static func validate(_ object: [String: JSONValue], messageID: String) -> Result<DownstreamMessage, DownstreamValidationError> {
        do throws(DownstreamValidationError) {
            return .success(try validateOrThrow(object, messageID: messageID))
        } catch {
            return .failure(error)
        }
    }

    static func validateOrThrow(_ object: [String: JSONValue], messageID: String) throws(DownstreamValidationError) -> DownstreamMessage {
        // Targets. Empty strings count as absent: several client libraries serialise unset fields as "".
        let to = try optionalString(object, "to").flatMap { $0.isEmpty ? nil : $0 }
        let condition = try optionalString(object, "condition").flatMap {
            $0.allSatisfy(\.isWhitespace) ? nil : $0
        }
        switch (to, condition) {
        case (nil, nil): throw .missingRegistration
        case (.some, .some): throw .conflictingTargets
        default: break
        }

        let collapseKey = try optionalString(object, "collapse_key").flatMap { $0.isEmpty ? nil : $0 }
        let priorityValue = object["priority"].flatMap { $0.isNull ? nil : $0 }
        if let priorityValue {
            switch priorityValue {
            case .string, .int, .double: break
            default: throw .fieldType(field: "priority", expected: .string, value: displayText(priorityValue))
            }
        }
        let ttlValue = try optionalTimeToLive(object)
        let contentAvailable = try optionalBool(object, "content_available")
        let mutableContent = try optionalBool(object, "mutable_content")
        let delayWhileIdle = try optionalBool(object, "delay_while_idle") ?? false
        let deliveryReceiptRequested = try optionalBool(object, "delivery_receipt_requested") ?? false
        let dryRun = try optionalBool(object, "dry_run") ?? false
        let dataObject = try optionalObject(object, "data")
        let notificationObject = try optionalObject(object, "notification")

        if let ttlValue, !(0...Int64(maximumTimeToLive)).contains(ttlValue.seconds) {
            throw .invalidTimeToLive(value: ttlValue.shown)
        }
        var priority: Priority?
        if let priorityValue { priority = try parsePriority(priorityValue) }

        if let to, to.hasPrefix(DownstreamTarget.topicPrefix) {
            guard DownstreamTarget.isValidTopicName(to.dropFirst(DownstreamTarget.topicPrefix.count)) else {
                throw .invalidTopic(to)
            }
        }
        if let condition {
            do throws(TopicConditionError) {
                _ = try TopicCondition.parse(condition)
            } catch {
                throw .invalidCondition(condition: condition, reason: error.reason)
            }
        }

        var data: [String: String]?
        if let dataObject {
            var strings: [String: String] = [:]
            strings.reserveCapacity(dataObject.count)
            var reserved: [String] = []
            for (key, value) in dataObject {
                if isReservedDataKey(key) { reserved.append(key) } else { strings[key] = stringified(value) }
            }
            // The smallest reserved key, so that the reported key is the same on every run.
            if let key = reserved.min(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) { throw .invalidDataKey(key) }
            data = strings
        }
        let notification = notificationObject.map(JSONValue.object)

        let bytes = payloadBytes(data: data, notification: notification)
        if bytes > maximumPayloadBytes { throw .messageTooBig(bytes: bytes) }

        var message = DownstreamMessage(
            to: to,
            condition: condition,
            messageID: messageID,
            collapseKey: collapseKey,
            priority: priority,
            contentAvailable: contentAvailable,
            mutableContent: mutableContent,
            timeToLive: ttlValue.map { Int($0.seconds) },
            delayWhileIdle: delayWhileIdle,
            deliveryReceiptRequested: deliveryReceiptRequested,
            dryRun: dryRun,
            data: data,
            notification: notification
        )
        message.dataBytes = bytes
        return message
    }

    /// How a client's value appears in an error text: strings bare, anything else as JSON.
    static func displayText(_ value: JSONValue) -> String {
        if case .string(let string) = value { return string }
        return value.encoded()
    }

    /// nil when absent or JSON null.
    private static func present(_ object: [String: JSONValue], _ field: String) -> JSONValue? {
        guard let value = object[field], !value.isNull else { return nil }
        return value
    }

    private static func optionalString(_ object: [String: JSONValue], _ field: String) throws(DownstreamValidationError) -> String? {
        guard let value = present(object, field) else { return nil }
        guard case .string(let string) = value else {
            throw .fieldType(field: field, expected: .string, value: displayText(value))
        }
        return string
    }

    /// Booleans, or the strings "true"/"false".
    private static func optionalBool(_ object: [String: JSONValue], _ field: String) throws(DownstreamValidationError) -> Bool? {
        guard let value = present(object, field) else { return nil }
        switch value {
        case .bool(let bool): return bool
        case .string("true"): return true
        case .string("false"): return false
        default: throw .fieldType(field: field, expected: .boolean, value: displayText(value))
        }
    }

    /// Objects; an empty array counts as an empty object (PHP encodes an empty array as `[]`).
    private static func optionalObject(_ object: [String: JSONValue], _ field: String) throws(DownstreamValidationError) -> [String: JSONValue]? {
        guard let value = present(object, field) else { return nil }
        switch value {
        case .object(let inner): return inner
        case .array(let array) where array.isEmpty: return [:]
        default: throw .fieldType(field: field, expected: .object, value: displayText(value))
        }
    }

    private struct TimeToLive {
        var seconds: Int64
        var shown: String
    }

    /// Numbers, or strings holding a JSON number (Google's own examples send `"600"`).
    /// Fractions are truncated toward zero, as Java's `Number.intValue()` would.
    private static func optionalTimeToLive(_ object: [String: JSONValue]) throws(DownstreamValidationError) -> TimeToLive? {
        guard let value = present(object, "time_to_live") else { return nil }
        let number: JSONValue
        switch value {
        case .int, .double:
            number = value
        case .string(let string):
            let trimmed = string.trimmingJSONWhitespace()
            guard !trimmed.isEmpty, let parsed = try? JSONValue.parse(String(trimmed)), parsed.numberValue != nil else {
                throw .fieldType(field: "time_to_live", expected: .number, value: string)
            }
            number = parsed
        default:
            throw .fieldType(field: "time_to_live", expected: .number, value: displayText(value))
        }
        let shown = displayText(value)
        switch number {
        case .int(let int):
            return TimeToLive(seconds: int, shown: shown)
        case .double(let double):
            let truncated = double.rounded(.towardZero)
            // Beyond Int64 it is out of range anyway; any out-of-range stand-in will do.
            let seconds = Int64(exactly: truncated) ?? (double < 0 ? -1 : Int64.max)
            return TimeToLive(seconds: seconds, shown: shown)
        default:
            throw .fieldType(field: "time_to_live", expected: .number, value: shown)
        }
    }

    /// "normal"/"high" in any letter case; APNs-style 5 and 10 (numbers or strings) as normal/high.
    /// An empty string counts as not given.
    private static func parsePriority(_ value: JSONValue) throws(DownstreamValidationError) -> Priority? {
        switch value {
        case .string(let string):
            switch string.lowercased() {
            case "": return nil
            case "normal", "5": return .normal
            case "high", "10": return .high
            default: throw .invalidPriority(value: string)
            }
        default:
            switch value.intValue {
            case 5?: return .normal
            case 10?: return .high
            default: throw .invalidPriority(value: displayText(value))
            }
        }
    }
}

extension String {
    /// Trims the characters JSON and XML treat as whitespace, plus other Unicode whitespace.
    func trimmingJSONWhitespace() -> Substring {
        let scalars = self.unicodeScalars
        var start = scalars.startIndex
        var end = scalars.endIndex
        while start < end, scalars[start].properties.isWhitespace { start = scalars.index(after: start) }
        while end > start, scalars[scalars.index(before: end)].properties.isWhitespace { end = scalars.index(before: end) }
        return self[start..<end]
    }
}
