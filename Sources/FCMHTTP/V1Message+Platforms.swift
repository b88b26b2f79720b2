import CCSProtocol
import PushDomain

extension V1MessageDecoder {
    /// `message.android`, checked, and what it changes of the canonical message.
    struct AndroidConfig {
        var json: JSONValue
        var collapseKey: String?
        var priority: Priority?
        var timeToLive: Int?
        var restrictedPackageName: String?
        /// Laid over `message.data`.
        var data: [String: String]?
        /// Laid over `message.notification` (what an Android device shows).
        var notification: Fields?

        init(_ android: Fields) throws(GoogleError) {
            json = .object(android.object)
            collapseKey = try android.string("collapse_key").flatMap { $0.isEmpty ? nil : $0 }
            priority = try Self.priority(android.string("priority"))
            if let raw = try android.string("ttl") {
                timeToLive = try timeToLiveSeconds(raw, field: "message.android.ttl")
            }
            restrictedPackageName = try android.string("restricted_package_name").flatMap { $0.isEmpty ? nil : $0 }
            data = try android.stringMap("data")
            notification = try Self.notification(android)
            _ = try android.bool("direct_boot_ok")
            _ = try android.bool("bandwidth_constrained_ok")
            _ = try android.bool("restricted_satellite_ok")
            if let options = try android.object("fcm_options", known: optionsFields) { try checkAnalyticsLabel(options) }
        }

        static func priority(_ raw: String?) throws(GoogleError) -> Priority? {
            guard let raw else { return nil }
            switch raw.uppercased() {
            case "NORMAL": return .normal
            case "HIGH": return .high
            case "": return nil
            default:
                throw .invalidArgument("Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), \(JSONValue.string(String(raw.prefix(100))).encoded()): must be NORMAL or HIGH",
                                       field: "message.android.priority", description: "must be NORMAL or HIGH")
            }
        }

        static func notification(_ android: Fields) throws(GoogleError) -> Fields? {
            let known = androidNotificationStrings.union(androidNotificationStringArrays).union(androidNotificationBools)
                .union(androidNotificationObjects).union(androidNotificationInts)
            guard let n = try android.object("notification", known: known) else { return nil }
            try n.strings(androidNotificationStrings)
            for name in androidNotificationStringArrays { _ = try n.stringArray(name) }
            for name in androidNotificationBools { _ = try n.bool(name) }
            for name in androidNotificationObjects { _ = try n.object(name, known: nil) }
            for name in androidNotificationInts { _ = try n.int(name) }
            if let color = try n.string("color"), !isColor(color) {
                throw .invalidArgument("Invalid value at 'message.android.notification.color': color must be in the form #RRGGBB, got \(JSONValue.string(String(color.prefix(40))).encoded())",
                                       field: "message.android.notification.color", description: "color must be in the form #RRGGBB")
            }
            return n
        }
    }

    /// `message.apns`, checked; kept as sent for iOS devices. Its `apns-priority` header is the
    /// message's priority when `android.priority` does not set one.
    struct APNsConfig {
        var json: JSONValue
        var priority: Priority?

        init(_ apns: Fields) throws(GoogleError) {
            json = .object(apns.object)
            if let headers = try apns.stringMap("headers") { priority = try Self.checkHeaders(headers) }
            if let payload = try apns.object("payload", known: nil), let aps = payload.object["aps"] {
                guard case .object = aps else {
                    throw .invalidArgument("Invalid value at 'message.apns.payload.aps': must be an object, got \(aps.kindDescription)",
                                           field: "message.apns.payload.aps", description: "must be an object")
                }
            }
            _ = try apns.string("live_activity_token")
            if let options = try apns.object("fcm_options", known: apnsOptionsFields) {
                try checkAnalyticsLabel(options)
                _ = try options.string("image")
            }
        }

        /// The headers FCM checks before it passes them to APNs; returns the priority they give.
        static func checkHeaders(_ headers: [String: String]) throws(GoogleError) -> Priority? {
            var priority: Priority?
            if let value = headers["apns-priority"] {
                switch value {
                case "10": priority = .high
                case "5", "1": priority = .normal
                default:
                    throw .invalidArgument("Invalid value at 'message.apns.headers[\"apns-priority\"]': must be \"10\", \"5\" or \"1\", got \(JSONValue.string(String(value.prefix(40))).encoded())",
                                           field: "message.apns.headers[\"apns-priority\"]", description: "must be 10, 5 or 1")
                }
            }
            if let value = headers["apns-expiration"], value.isEmpty || value.utf8.count > 19 || !value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
                throw .invalidArgument("Invalid value at 'message.apns.headers[\"apns-expiration\"]': must be a UNIX epoch date in seconds, got \(JSONValue.string(String(value.prefix(40))).encoded())",
                                       field: "message.apns.headers[\"apns-expiration\"]", description: "must be a UNIX epoch date in seconds")
            }
            if let value = headers["apns-collapse-id"], value.utf8.count > 64 {
                throw .invalidArgument("Invalid value at 'message.apns.headers[\"apns-collapse-id\"]': at most 64 bytes, got \(value.utf8.count)",
                                       field: "message.apns.headers[\"apns-collapse-id\"]", description: "at most 64 bytes")
            }
            return priority
        }
    }
}
