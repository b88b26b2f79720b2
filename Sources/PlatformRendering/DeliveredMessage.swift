import PushDomain

/// One stored message as the platform renderers read it: the payload the device channel carries
/// (the Android `RemoteMessage` form the engine stores: `notification`, `data`, `priority`, `ttl`,
/// `collapse_key`, `content_available`, `mutable_content`, `message_id`, `from`, `sent_time`) and
/// HTTP v1's platform blocks kept beside it (`android`, `apns`, `webpush`, and the cross-platform
/// `notification` / `data` where android's overrides changed them).
public struct DeliveredMessage: Sendable, Equatable {
    public var payload: [String: JSONValue]
    public var blocks: [String: JSONValue]
    /// When the service accepted it (ms): APNs's default `apns-expiration` counts from here.
    public var acceptedAtMillis: Int64
    /// The app's package / bundle id (APNs `apns-topic`).
    public var app: String
    /// The app is in the background: a notification is the system's to show, not the app's.
    public var appInBackground: Bool

    public init(payload: [String: JSONValue], blocks: [String: JSONValue] = [:], acceptedAtMillis: Int64,
                app: String = "", appInBackground: Bool = false) {
        self.payload = payload
        self.blocks = blocks
        self.acceptedAtMillis = acceptedAtMillis
        self.app = app
        self.appInBackground = appInBackground
    }

    /// From the stored texts; a text that is not a JSON object counts as empty (the store wrote both,
    /// so that is never expected, and a view is still rendered from what there is).
    public init(payloadJSON: String, platformBlocksJSON: String?, acceptedAtMillis: Int64, app: String,
                appInBackground: Bool) {
        let payload = (try? JSONValue.parse(payloadJSON))?.objectValue ?? [:]
        let blocks = platformBlocksJSON.flatMap { (try? JSONValue.parse($0))?.objectValue } ?? [:]
        self.init(payload: payload, blocks: blocks, acceptedAtMillis: acceptedAtMillis, app: app,
                  appInBackground: appInBackground)
    }

    /// The notification as Android shows it (v1: `message.notification` with android's laid over).
    var notification: [String: JSONValue]? { payload["notification"]?.objectValue }

    /// The cross-platform notification for iOS and web: v1's own when android changed it.
    var sharedNotification: [String: JSONValue]? {
        if let shared = blocks["notification"] { return shared.objectValue }
        return notification
    }

    var data: [String: JSONValue]? { payload["data"]?.objectValue }

    var sharedData: [String: JSONValue]? {
        if let shared = blocks["data"] { return shared.objectValue }
        return data
    }

    var priority: Priority { payload["priority"]?.stringValue.flatMap(Priority.init(rawValue:)) ?? .normal }
    var timeToLive: Int64 { payload["ttl"]?.intValue ?? Int64(Message.maximumTimeToLive) }
    var contentAvailable: Bool { payload["content_available"]?.boolValue == true }
    var mutableContent: Bool { payload["mutable_content"]?.boolValue == true }
    var messageID: String { payload["message_id"]?.stringValue ?? "" }

    func block(_ name: String) -> [String: JSONValue]? { blocks[name]?.objectValue }
}

/// How the platform presents a message: the system shows a notification (app in the background), or
/// the app's own code gets it (`onMessageReceived`, `willPresent`/`didReceiveRemoteNotification`,
/// the page's `onMessage`).
public enum Presentation: String, Sendable {
    case system
    case app
}

/// The legacy/XMPP `notification` keys hold strings, but clients also send numbers and booleans;
/// a renderer takes a string where one is meant and the JSON text otherwise.
func text(_ value: JSONValue?) -> String? {
    switch value {
    case .string(let s)?: return s
    case nil, .null?: return nil
    case .object?, .array?: return value!.encoded()
    case let other?: return other.encoded()
    }
}

/// `body_loc_args` / `title_loc_args`: an array, or (legacy, as the admin SDKs send it) the array's
/// JSON text. Anything else is no arguments.
func locArgs(_ value: JSONValue?) -> JSONValue? {
    switch value {
    case .array(let items)?: return .array(items.map { .string(text($0) ?? "") })
    case .string(let s)?:
        if case .array(let items)? = try? JSONValue.parse(s) { return .array(items.map { .string(text($0) ?? "") }) }
        return .array([.string(s)])
    default: return nil
    }
}
