import CCSProtocol
import PushDomain

/// A `messages:send` body after validation.
struct V1SendRequest: Sendable, Equatable {
    var message: Message
    var target: Target
    var validateOnly: Bool
}

/// Decodes and checks an HTTP v1 `messages:send` body (`{"message":{…},"validate_only":bool}`) the way
/// Google's proto3 JSON parser does: unknown field names are refused (snake_case and lowerCamelCase
/// both accepted), maps take string values only, enums and durations are checked, and every refusal
/// names the field path (`message.android.ttl`).
///
/// Mapping into the canonical `Message`: `data` is `message.data` with `android.data` laid over it,
/// `notification` is `message.notification` with `android.notification` laid over it (what an Android
/// device shows; the `apns` and `webpush` blocks are kept as sent for the other platforms, and the
/// cross-platform `notification` / `data` as `sharedNotification` / `sharedData` when android changed them);
/// `android.ttl` → time to live (fractions round up, so "0.5s" is not "now or never");
/// `android.priority`, else `apns-priority` (10 → high, 5 or 1 → normal) → priority;
/// `android.collapse_key` → collapse key; `android.restricted_package_name` → restricted package.
enum V1MessageDecoder {
    static let topLevelFields: Set<String> = ["message", "validate_only"]
    static let messageFields: Set<String> = ["name", "data", "notification", "android", "webpush", "apns", "fcm_options",
                                             "token", "topic", "condition"]
    static let notificationFields: Set<String> = ["title", "body", "image"]
    static let androidFields: Set<String> = ["collapse_key", "priority", "ttl", "restricted_package_name", "data",
                                             "notification", "fcm_options", "direct_boot_ok", "bandwidth_constrained_ok",
                                             "restricted_satellite_ok"]
    static let androidNotificationStrings: Set<String> = [
        "title", "body", "icon", "color", "sound", "tag", "click_action", "body_loc_key", "title_loc_key", "channel_id",
        "ticker", "event_time", "image", "notification_priority", "visibility", "proxy",
    ]
    static let androidNotificationStringArrays: Set<String> = ["body_loc_args", "title_loc_args", "vibrate_timings"]
    static let androidNotificationBools: Set<String> = ["sticky", "local_only", "default_sound", "default_vibrate_timings",
                                                        "default_light_settings", "bypass_proxy_notification"]
    static let androidNotificationObjects: Set<String> = ["light_settings"]
    static let androidNotificationInts: Set<String> = ["notification_count"]
    static let apnsFields: Set<String> = ["headers", "payload", "fcm_options", "live_activity_token"]
    static let apnsOptionsFields: Set<String> = ["analytics_label", "image"]
    static let webpushFields: Set<String> = ["headers", "data", "notification", "fcm_options"]
    static let webpushOptionsFields: Set<String> = ["link", "analytics_label"]
    static let optionsFields: Set<String> = ["analytics_label"]
    /// protobuf Duration's largest number of seconds.
    static let maximumDurationSeconds: Int64 = 315_576_000_000

    static func decode(_ body: JSONValue, messageID: String) -> Result<V1SendRequest, GoogleError> {
        do throws(GoogleError) {
            return .success(try decodeOrThrow(body, messageID: messageID))
        } catch {
            return .failure(error)
        }
    }

    static func decodeOrThrow(_ body: JSONValue, messageID: String) throws(GoogleError) -> V1SendRequest {
        guard case .object(let top) = body else {
            throw .invalidArgument("Invalid JSON payload received. Expected an object at the top level, got \(body.kindDescription).",
                                   field: "", description: "the body must be a JSON object")
        }
        let request = try Fields(top, path: "", known: topLevelFields)
        let validateOnly = try request.bool("validate_only") ?? false
        guard let message = try request.object("message", known: messageFields) else {
            throw .invalidArgument("Recipient of the message is not set: the body has no \"message\" (message).", field: "message",
                                   description: "message is required")
        }
        let target = try decodeTarget(message)
        let sharedData = try message.stringMap("data")
        let notification = try message.object("notification", known: notificationFields)
        try notification?.strings(notificationFields)
        // The field groups in the order Google's parser reports them.
        var android: AndroidConfig?
        if let fields = try message.object("android", known: androidFields) { android = try AndroidConfig(fields) }
        var apns: APNsConfig?
        if let fields = try message.object("apns", known: apnsFields) { apns = try APNsConfig(fields) }
        var webpushJSON: JSONValue?
        if let fields = try message.object("webpush", known: webpushFields) { webpushJSON = try decodeWebpush(fields) }
        if let options = try message.object("fcm_options", known: optionsFields) { try checkAnalyticsLabel(options) }

        var data = sharedData
        if let androidData = android?.data { data = (data ?? [:]).merging(androidData) { _, android in android } }
        try checkReservedKeys(data)
        var notificationJSON: JSONValue?
        if notification != nil || android?.notification != nil {
            let merged = (notification?.object ?? [:]).merging(android?.notification?.object ?? [:]) { _, android in android }
            notificationJSON = .object(merged)
        }
        let bytes = DownstreamMessage.payloadBytes(data: data, notification: notificationJSON)
        if bytes > DownstreamMessage.maximumPayloadBytes {
            throw .invalidArgument("Message is too big (message.data and message.notification): \(bytes) bytes, the limit is \(DownstreamMessage.maximumPayloadBytes)",
                                   field: "message", description: "message is too big")
        }

        var canonical = Message(messageID: messageID, collapseKey: android?.collapseKey, priority: android?.priority ?? apns?.priority,
                                timeToLive: android?.timeToLive ?? Message.maximumTimeToLive, dryRun: validateOnly, data: data,
                                notification: notificationJSON, restrictedPackageName: android?.restrictedPackageName,
                                android: android?.json, apns: apns?.json, webpush: webpushJSON)
        // iOS and web see the cross-platform fields without android's overrides (null / {}: none).
        if android?.notification != nil { canonical.sharedNotification = notification.map { .object($0.object) } ?? .null }
        if data != sharedData { canonical.sharedData = sharedData ?? [:] }
        return V1SendRequest(message: canonical, target: target, validateOnly: validateOnly)
    }

    /// Exactly one of `token`, `topic` and `condition`, checked.
    static func decodeTarget(_ message: Fields) throws(GoogleError) -> Target {
        let token = try message.string("token").flatMap { $0.isEmpty ? nil : $0 }
        let topic = try message.string("topic").flatMap { $0.isEmpty ? nil : $0 }
        let condition = try message.string("condition").flatMap { $0.allSatisfy(\.isWhitespace) ? nil : $0 }
        let given = [("token", token), ("topic", topic), ("condition", condition)].filter { $0.1 != nil }
        if given.isEmpty {
            throw .invalidArgument("Recipient of the message is not set: give one of message.token, message.topic or message.condition.",
                                   field: "message", description: "Recipient of the message is not set.")
        }
        if given.count > 1 {
            throw .invalidArgument("Invalid JSON payload received. Oneof field 'target' is already set. Cannot set 'message.\(given[1].0)' (message.\(given[0].0) is set).",
                                   field: "message.\(given[1].0)", description: "only one of token, topic and condition may be set")
        }
        if let token { return .token(token) }
        if var name = topic {
            if name.hasPrefix(DownstreamTarget.topicPrefix) { name.removeFirst(DownstreamTarget.topicPrefix.count) }
            guard DownstreamTarget.isValidTopicName(name) else {
                throw .invalidArgument("Invalid value at 'message.topic': topic names match [a-zA-Z0-9-_.~%]+, got \(JSONValue.string(String(name.prefix(200))).encoded())",
                                       field: "message.topic", description: "malformed topic name")
            }
            return .topic(name)
        }
        let source = condition!
        do throws(TopicConditionError) {
            _ = try TopicCondition.parse(source)
        } catch {
            throw .invalidArgument("Invalid value at 'message.condition': \(error.reason)", field: "message.condition",
                                   description: error.reason)
        }
        return .condition(source)
    }

    /// `message.webpush`, checked; kept as sent for web devices.
    static func decodeWebpush(_ webpush: Fields) throws(GoogleError) -> JSONValue {
        _ = try webpush.stringMap("headers")
        _ = try webpush.stringMap("data")
        _ = try webpush.object("notification", known: nil)
        if let options = try webpush.object("fcm_options", known: webpushOptionsFields) {
            try checkAnalyticsLabel(options)
            if let link = try options.string("link"), !link.isEmpty, !link.lowercased().hasPrefix("https://") {
                throw .invalidArgument("Invalid value at 'message.webpush.fcm_options.link': the link must use HTTPS, got \(JSONValue.string(String(link.prefix(200))).encoded())",
                                       field: "message.webpush.fcm_options.link", description: "the link must use HTTPS")
            }
        }
        return .object(webpush.object)
    }

    /// FCM refuses data keys it keeps for itself; the first in byte order is named.
    static func checkReservedKeys(_ data: [String: String]?) throws(GoogleError) {
        guard let data else { return }
        let reserved = data.keys.filter(DownstreamMessage.isReservedDataKey)
        if let key = reserved.min(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            throw .invalidArgument("Invalid value at 'message.data': the key \(JSONValue.string(key).encoded()) is reserved (\"from\", \"message_type\" and keys starting with \"google\" or \"gcm.notification.\")",
                                   field: "message.data[\(JSONValue.string(key).encoded())]", description: "reserved key")
        }
    }
    /// A protobuf Duration string ("3.5s", "4500s") as whole seconds, fractions rounded up, checked
    /// against FCM's 0 … 4 weeks.
    static func timeToLiveSeconds(_ raw: String, field: String) throws(GoogleError) -> Int {
        let invalid = GoogleError.invalidArgument(
            "Invalid value at '\(field)' (type.googleapis.com/google.protobuf.Duration), \(JSONValue.string(String(raw.prefix(40))).encoded()): a duration is seconds with up to 9 decimals and an \"s\", like \"3.5s\"",
            field: field, description: "malformed duration")
        guard raw.hasSuffix("s") else { throw invalid }
        let number = raw.dropLast()
        let pieces = number.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let whole = pieces[0]
        guard !whole.isEmpty, whole.utf8.count <= 12, whole.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let seconds = Int64(whole), seconds <= maximumDurationSeconds else {
            if whole.hasPrefix("-") {
                throw .invalidArgument("Invalid value at '\(field)': the time to live must not be negative, got \(JSONValue.string(String(raw.prefix(40))).encoded())",
                                       field: field, description: "must not be negative")
            }
            throw invalid
        }
        var roundUp = false
        if pieces.count == 2 {
            let fraction = pieces[1]
            guard !fraction.isEmpty, fraction.utf8.count <= 9, fraction.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { throw invalid }
            roundUp = fraction.utf8.contains { $0 != 0x30 }
        }
        let total = seconds + (roundUp ? 1 : 0)
        guard total <= Int64(Message.maximumTimeToLive) else {
            throw .invalidArgument("Invalid value at '\(field)': the time to live must be at most \(Message.maximumTimeToLive)s (4 weeks), got \(JSONValue.string(raw).encoded())",
                                   field: field, description: "at most 4 weeks")
        }
        return Int(total)
    }

    static func checkAnalyticsLabel(_ options: Fields) throws(GoogleError) {
        guard let label = try options.string("analytics_label") else { return }
        let allowed = label.utf8.allSatisfy {
            ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A)
                || $0 == 0x2D || $0 == 0x5F || $0 == 0x2E || $0 == 0x7E || $0 == 0x25
        }
        guard allowed, label.utf8.count <= 50 else {
            let field = options.path + ".analytics_label"
            throw .invalidArgument("Invalid value at '\(field)': an analytics label is 1 to 50 characters of [a-zA-Z0-9-_.~%]",
                                   field: field, description: "malformed analytics label")
        }
    }

    static func isColor(_ s: String) -> Bool {
        let bytes = Array(s.utf8)
        return bytes.count == 7 && bytes[0] == 0x23 && bytes[1...].allSatisfy {
            ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x46) || ($0 >= 0x61 && $0 <= 0x66)
        }
    }

    /// One JSON object of the request, with its path for error texts. Field names are normalised to
    /// snake_case when the object has a fixed set of fields (proto3 JSON accepts `collapseKey` for
    /// `collapse_key`); free-form objects (maps, `apns.payload`) keep theirs.
    struct Fields {
        let path: String
        let object: [String: JSONValue]

        init(_ object: [String: JSONValue], path: String, known: Set<String>?) throws(GoogleError) {
            self.path = path
            guard let known else {
                self.object = object
                return
            }
            var normalised: [String: JSONValue] = [:]
            for (key, value) in object {
                let name = known.contains(key) ? key : V1MessageDecoder.snakeCase(key)
                guard known.contains(name) else {
                    let at = path.isEmpty ? "" : " at '\(path)'"
                    let field = path.isEmpty ? key : path + "." + key
                    throw .invalidArgument("Invalid JSON payload received. Unknown name \(JSONValue.string(String(key.prefix(100))).encoded())\(at): Cannot find field.",
                                           field: field, description: "unknown field")
                }
                // proto3 JSON: null is "not set".
                if value.isNull { continue }
                if normalised[name] == nil { normalised[name] = value }
            }
            self.object = normalised
        }

        func field(_ name: String) -> String { path.isEmpty ? name : path + "." + name }

        func typeError(_ name: String, _ expected: String, _ value: JSONValue) -> GoogleError {
            .invalidArgument("Invalid value at '\(field(name))' (\(expected)), \(String(value.encoded().prefix(100)))",
                             field: field(name), description: "must be \(expected)")
        }

        func string(_ name: String) throws(GoogleError) -> String? {
            guard let value = object[name] else { return nil }
            guard case .string(let s) = value else { throw typeError(name, "TYPE_STRING", value) }
            return s
        }

        func strings(_ names: Set<String>) throws(GoogleError) {
            for name in names { _ = try string(name) }
        }

        func bool(_ name: String) throws(GoogleError) -> Bool? {
            guard let value = object[name] else { return nil }
            guard case .bool(let b) = value else { throw typeError(name, "TYPE_BOOL", value) }
            return b
        }

        func int(_ name: String) throws(GoogleError) -> Int64? {
            guard let value = object[name] else { return nil }
            switch value {
            case .int(let i) where i >= Int64(Int32.min) && i <= Int64(Int32.max): return i
            // proto3 JSON also takes integers as strings.
            case .string(let s): if let i = Int32(s) { return Int64(i) }
            default: break
            }
            throw typeError(name, "TYPE_INT32", value)
        }

        func stringArray(_ name: String) throws(GoogleError) -> [String]? {
            guard let value = object[name] else { return nil }
            guard case .array(let items) = value else { throw typeError(name, "TYPE_STRING, repeated", value) }
            var result: [String] = []
            for (index, item) in items.enumerated() {
                guard case .string(let s) = item else {
                    throw .invalidArgument("Invalid value at '\(field(name))[\(index)]' (TYPE_STRING), \(String(item.encoded().prefix(100)))",
                                           field: "\(field(name))[\(index)]", description: "must be a string")
                }
                result.append(s)
            }
            return result
        }

        /// A `map<string, string>`: string values only.
        func stringMap(_ name: String) throws(GoogleError) -> [String: String]? {
            guard let value = object[name] else { return nil }
            guard case .object(let map) = value else { throw typeError(name, "map<string, string>", value) }
            var result: [String: String] = [:]
            result.reserveCapacity(map.count)
            for (key, item) in map {
                guard case .string(let s) = item else {
                    let at = "\(field(name))[\(JSONValue.string(String(key.prefix(100))).encoded())]"
                    throw .invalidArgument("Invalid value at '\(at)' (TYPE_STRING), \(String(item.encoded().prefix(100))): map values must be strings",
                                           field: at, description: "must be a string")
                }
                result[key] = s
            }
            return result
        }

        func object(_ name: String, known: Set<String>?) throws(GoogleError) -> Fields? {
            guard let value = object[name] else { return nil }
            guard case .object(let inner) = value else { throw typeError(name, "an object", value) }
            return try Fields(inner, path: field(name), known: known)
        }
    }

    /// `collapseKey` → `collapse_key`.
    static func snakeCase(_ name: String) -> String {
        var result = ""
        result.reserveCapacity(name.utf8.count + 4)
        for character in name {
            if character.isUppercase, character.isASCII {
                result.append("_")
                result.append(Character(character.lowercased()))
            } else {
                result.append(character)
            }
        }
        return result
    }
}
