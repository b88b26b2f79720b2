import PushDomain

/// What an Android device shows, from the firebase-messaging SDK's point of view: the notification
/// it builds itself when the app is in the background (`DisplayNotification`), else the
/// `RemoteMessage` handed to `onMessageReceived`. docs/platforms.md has the table.
public enum AndroidView {
    /// Notification keys Android uses, in the v1 `AndroidNotification` names. Legacy names that
    /// differ are mapped (`android_channel_id` → `channel_id`); iOS-only keys (`badge`, `subtitle`)
    /// are not shown.
    static let notificationKeys: [String] = [
        "title", "body", "image", "icon", "color", "sound", "tag", "click_action", "channel_id",
        "body_loc_key", "title_loc_key", "ticker", "sticky", "event_time", "local_only", "notification_priority",
        "default_sound", "default_vibrate_timings", "default_light_settings", "vibrate_timings", "visibility",
        "notification_count", "light_settings",
    ]

    public static func render(_ m: DeliveredMessage) -> JSONValue {
        var view: [String: JSONValue] = ["platform": .string(Platform.android.rawValue)]
        var notification: [String: JSONValue] = [:]
        if let source = m.notification {
            for key in notificationKeys {
                if let value = source[key], !value.isNull { notification[key] = value }
            }
            if notification["channel_id"] == nil, let legacy = source["android_channel_id"], !legacy.isNull {
                notification["channel_id"] = legacy
            }
            for key in ["body_loc_args", "title_loc_args"] {
                if let args = locArgs(source[key]) { notification[key] = args }
            }
            view["notification"] = .object(notification)
        }
        if let data = m.data { view["data"] = .object(data) }
        for key in ["collapse_key", "message_id", "from", "sent_time", "ttl"] {
            if let value = m.payload[key] { view[key] = value }
        }
        view["priority"] = .string(m.priority.rawValue)
        view["original_priority"] = m.payload["original_priority"] ?? .string(m.priority.rawValue)
        // A notification message for a backgrounded app goes to the tray; anything else to the app.
        let system = m.notification != nil && m.appInBackground
        view["presentation"] = .string((system ? Presentation.system : .app).rawValue)
        if system, let image = notification["image"]?.stringValue, !image.isEmpty {
            view["image"] = .string(image)
        }
        return .object(view)
    }
}
