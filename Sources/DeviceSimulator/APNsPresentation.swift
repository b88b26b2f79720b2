import CCSProtocol
import PushDomain

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
    /// payload).
    public var presentation: Presentation

    public enum Presentation: String, Sendable {
        case alert
        /// A silent background wake-up (`content-available`, nothing shown).
        case backgroundWakeup = "background_wakeup"
        /// PushKit hands it to the app, which reports an incoming call.
        case voipCall = "voip_call"
        case liveActivityUpdate = "live_activity_update"
        case complicationUpdate = "complication_update"
        case fileProviderChange = "file_provider_change"
        case locationQuery = "location_query"
        case pushToTalk = "push_to_talk"
        case widgetReload = "widget_reload"
        case mdmCheckIn = "mdm_check_in"
        /// Nothing to show and no wake-up.
        case none
    }

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

    static func presentation(pushType: String?, alert: Bool, contentAvailable: Bool) -> Presentation {
        switch pushType {
        case "voip"?: return .voipCall
        case "liveactivity"?: return .liveActivityUpdate
        case "complication"?: return .complicationUpdate
        case "fileprovider"?: return .fileProviderChange
        case "location"?: return .locationQuery
        case "pushtotalk"?: return .pushToTalk
        case "widgets"?: return .widgetReload
        case "mdm"?: return .mdmCheckIn
        case "background"?: return .backgroundWakeup
        default: return alert ? .alert : contentAvailable ? .backgroundWakeup : Presentation.none
        }
    }

    /// The `apns` event of `ccs-emulator device`.
    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "payload": payload, "content_available": .bool(contentAvailable), "mutable_content": .bool(mutableContent),
            "presentation": .string(presentation.rawValue),
        ]
        if let alert { fields["alert"] = alert }
        if let badge { fields["badge"] = .int(badge) }
        if let sound { fields["sound"] = sound }
        return .object(fields)
    }
}
