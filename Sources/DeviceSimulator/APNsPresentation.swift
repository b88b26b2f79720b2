import CCSProtocol

/// What an iOS app makes of an APNs notification: the payload as received, and the `aps` keys the
/// system acts on (alert, badge, sound, the `content-available` background wake, the
/// `mutable-content` pass through a notification service extension). Kept small on purpose: the
/// platforms' rendering of FCM messages for iOS is its own work (issue 16).
public struct APNsPresentation: Sendable, Equatable {
    public var payload: JSONValue
    public var alert: JSONValue?
    public var badge: Int64?
    public var sound: JSONValue?
    /// `content-available: 1`: the app is woken in the background.
    public var contentAvailable: Bool
    /// `mutable-content: 1`: the notification service extension may change it before it is shown.
    public var mutableContent: Bool
    /// How iOS presents it, from the HTTP/2 `apns-push-type` (the binary gateway has none: from the
    /// payload): `alert`, `background_wakeup` (silent), `voip_call` (PushKit), `live_activity_update`,
    /// `complication_update`, `file_provider_change`, `location_query`, `push_to_talk`,
    /// `widget_reload`, `mdm_check_in`, or `none` (nothing to show, no wake-up).
    public var presentation: String

    /// From the device channel's `{"message_type":"apns",…,"payload":{…}}`; nil for anything else.
    public init?(message: JSONValue) {
        guard message["message_type"]?.stringValue == "apns", let payload = message["payload"],
              let aps = payload["aps"]?.objectValue else { return nil }
        self.payload = payload
        alert = aps["alert"]
        badge = aps["badge"]?.intValue
        sound = aps["sound"]
        contentAvailable = aps["content-available"]?.intValue == 1
        mutableContent = aps["mutable-content"]?.intValue == 1
        presentation = Self.presentation(pushType: message["apns"]?["push_type"]?.stringValue,
                                         alert: alert != nil || badge != nil || sound != nil,
                                         contentAvailable: contentAvailable)
    }

    static func presentation(pushType: String?, alert: Bool, contentAvailable: Bool) -> String {
        switch pushType {
        case "voip"?: return "voip_call"
        case "liveactivity"?: return "live_activity_update"
        case "complication"?: return "complication_update"
        case "fileprovider"?: return "file_provider_change"
        case "location"?: return "location_query"
        case "pushtotalk"?: return "push_to_talk"
        case "widgets"?: return "widget_reload"
        case "mdm"?: return "mdm_check_in"
        case "background"?: return "background_wakeup"
        default: return alert ? "alert" : contentAvailable ? "background_wakeup" : "none"
        }
    }

    /// The `apns` event of `ccs-emulator device`.
    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "payload": payload, "content_available": .bool(contentAvailable), "mutable_content": .bool(mutableContent),
            "presentation": .string(presentation),
        ]
        if let alert { fields["alert"] = alert }
        if let badge { fields["badge"] = .int(badge) }
        if let sound { fields["sound"] = sound }
        return .object(fields)
    }
}
