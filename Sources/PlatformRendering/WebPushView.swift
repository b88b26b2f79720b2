import PushDomain

/// What a browser with the Firebase JS SDK shows: the service worker's notification when the page
/// is in the background (or closed), else the payload handed to the page's `onMessage`.
public enum WebPushView {
    /// Cross-platform / legacy notification keys a web notification uses.
    static let notificationKeys = ["title", "body", "icon", "image", "tag"]

    public static func render(_ m: DeliveredMessage) -> JSONValue {
        var view: [String: JSONValue] = ["platform": .string(Platform.web.rawValue)]
        let webpush = m.block("webpush")
        var notification: [String: JSONValue]?
        if let shared = m.sharedNotification {
            var n: [String: JSONValue] = [:]
            for key in notificationKeys { if let value = text(shared[key]) { n[key] = .string(value) } }
            notification = n
        }
        // webpush.notification is a free-form object (the Notification API's options): laid over as is.
        if let given = webpush?["notification"]?.objectValue {
            notification = (notification ?? [:]).merging(given) { _, given in given }
        }
        let headers = webpush?["headers"]?.objectValue?.compactMapValues(\.stringValue) ?? [:]
        // Seed 003 puts the image in webpush.headers.image: shown when nothing else names one.
        if notification != nil, notification?["image"] == nil, let image = headers["image"], !image.isEmpty {
            notification?["image"] = .string(image)
        }
        if let notification { view["notification"] = .object(notification) }

        var data = m.sharedData ?? [:]
        for (key, value) in webpush?["data"]?.objectValue ?? [:] { data[key] = value }
        if m.sharedData != nil || webpush?["data"] != nil { view["data"] = .object(data) }

        // The link opened on a click: webpush.fcm_options.link, else (legacy) click_action.
        if let link = webpush?["fcm_options"]?["link"]?.stringValue, !link.isEmpty {
            view["link"] = .string(link)
        } else if let action = text(m.sharedNotification?["click_action"]), !action.isEmpty {
            view["link"] = .string(action)
        }

        // The Web Push request's headers (RFC 8030): TTL and Urgency from the message unless given.
        var sent = headers
        if sent["TTL"] == nil { sent["TTL"] = String(m.timeToLive) }
        if sent["Urgency"] == nil { sent["Urgency"] = m.priority == .high ? "high" : "normal" }
        if sent["Topic"] == nil, let key = m.payload["collapse_key"]?.stringValue { sent["Topic"] = key }
        view["headers"] = .object(sent.mapValues { .string($0) })
        for key in ["message_id", "from", "collapse_key"] {
            if let value = m.payload[key] { view[key] = value }
        }
        let system = notification != nil && m.appInBackground
        view["presentation"] = .string((system ? Presentation.system : .app).rawValue)
        if system, let image = notification?["image"]?.stringValue, !image.isEmpty { view["image"] = .string(image) }
        return .object(view)
    }
}

/// One message rendered for the platform of the device it is handed to.
public enum PlatformView {
    public static func render(_ m: DeliveredMessage, for platform: Platform) -> JSONValue {
        switch platform {
        case .android: AndroidView.render(m)
        case .ios: IOSView.render(m)
        case .web: WebPushView.render(m)
        }
    }
}
