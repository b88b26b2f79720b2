import PushDomain

/// What FCM hands APNs for an iOS device, and so what the app receives: the request headers and
/// the JSON payload (`aps` plus the custom keys at the top level). Pure: the device channel, the
/// admin API, the send-time size check and any other front end (an APNs gateway) call it alike.
public struct APNsNotification: Sendable, Equatable {
    /// APNs refuses a larger payload (HTTP/2 provider API and the legacy binary interface alike).
    public static let maximumPayloadBytes = 4096

    public var headers: [String: String]
    public var payload: [String: JSONValue]

    /// The payload as sent (compact, keys sorted).
    public var payloadJSON: String { JSONValue.object(payload).encoded() }
    public var payloadBytes: Int { payloadJSON.utf8.count }
    public var fitsAPNs: Bool { payloadBytes <= Self.maximumPayloadBytes }

    var aps: [String: JSONValue] { payload["aps"]?.objectValue ?? [:] }

    /// Something the user sees or hears: an alert, a badge or a sound.
    public var isAlert: Bool { aps["alert"] != nil || aps["badge"] != nil || aps["sound"] != nil }

    /// A background push (`content-available: 1`, nothing to show): iOS wakes the app for it.
    public var wakesApp: Bool { !isAlert && aps["content-available"]?.intValue == 1 }

    /// The image the notification service extension attaches (FirebaseMessaging's extension helper
    /// reads `fcm_options.image`); nil when there is none or no extension runs (`mutable-content` not 1).
    public var serviceExtensionImage: String? {
        guard aps["mutable-content"]?.intValue == 1, isAlert else { return nil }
        guard let image = payload["fcm_options"]?["image"]?.stringValue, !image.isEmpty else { return nil }
        return image
    }

    /// FCM's translation (docs/platforms.md, "iOS"): the cross-platform notification and data
    /// first, then the v1 `apns` block laid over them (its `payload.aps` key by key, `aps.alert`
    /// merged when both are objects, its other payload keys and its headers replacing ours).
    public static func translate(_ m: DeliveredMessage) -> APNsNotification {
        var aps: [String: JSONValue] = [:]
        var payload: [String: JSONValue] = [:]
        let notification = m.sharedNotification
        if let n = notification {
            var alert: [String: JSONValue] = [:]
            for (ours, theirs) in alertKeys {
                if let value = text(n[ours]) { alert[theirs] = .string(value) }
            }
            if let args = locArgs(n["body_loc_args"]) { alert["loc-args"] = args }
            if let args = locArgs(n["title_loc_args"]) { alert["title-loc-args"] = args }
            if !alert.isEmpty { aps["alert"] = .object(alert) }
            if let badge = n["badge"], let count = badge.intValue ?? text(badge).flatMap({ Int64($0) }) {
                aps["badge"] = .int(count)
            }
            if let sound = text(n["sound"]) { aps["sound"] = .string(sound) }
            if let category = text(n["click_action"]) { aps["category"] = .string(category) }
            if let image = text(n["image"]), !image.isEmpty { payload["fcm_options"] = .object(["image": .string(image)]) }
        }
        if m.contentAvailable { aps["content-available"] = .int(1) }
        if m.mutableContent { aps["mutable-content"] = .int(1) }
        for (key, value) in m.sharedData ?? [:] { payload[key] = value }

        var headers: [String: String] = [:]
        let apns = m.block("apns")
        if let given = apns?["payload"]?.objectValue {
            for (key, value) in given where key != "aps" { payload[key] = value }
            for (key, value) in given["aps"]?.objectValue ?? [:] {
                if key == "alert", case .object(let ours)? = aps["alert"], case .object(let theirs) = value {
                    aps["alert"] = .object(ours.merging(theirs) { _, theirs in theirs })
                } else {
                    aps[key] = value
                }
            }
        }
        if let image = apns?["fcm_options"]?["image"]?.stringValue, !image.isEmpty {
            var options = payload["fcm_options"]?.objectValue ?? [:]
            options["image"] = .string(image)
            payload["fcm_options"] = .object(options)
        }
        if !m.messageID.isEmpty { payload["gcm.message_id"] = .string(m.messageID) }
        payload["aps"] = .object(aps)

        var result = APNsNotification(headers: [:], payload: payload)
        // Defaults from the message; the v1 block's headers win.
        let background = !result.isAlert
        headers["apns-push-type"] = background ? "background" : "alert"
        // Apple: a background (content-available only) push must go at priority 5.
        headers["apns-priority"] = background || m.priority == .normal ? "5" : "10"
        // TTL 0 is APNs's 0: deliver once, now, or never.
        headers["apns-expiration"] = m.timeToLive == 0 ? "0" : String(m.acceptedAtMillis / 1000 + m.timeToLive)
        if let key = m.payload["collapse_key"]?.stringValue, key.utf8.count <= 64 { headers["apns-collapse-id"] = key }
        if !m.app.isEmpty { headers["apns-topic"] = m.app }
        for (key, value) in apns?["headers"]?.objectValue ?? [:] {
            if let s = value.stringValue { headers[key.lowercased()] = s }
        }
        result.headers = headers
        return result
    }

    /// Legacy / v1 notification keys → `aps.alert` keys.
    static let alertKeys: [(String, String)] = [
        ("title", "title"), ("subtitle", "subtitle"), ("body", "body"), ("body_loc_key", "loc-key"),
        ("title_loc_key", "title-loc-key"), ("action_loc_key", "action-loc-key"), ("launch_image", "launch-image"),
    ]
}

/// What an iOS device shows: the APNs notification, how it is presented, and the image the
/// service extension fetches.
public enum IOSView {
    public static func render(_ m: DeliveredMessage) -> JSONValue {
        let apns = APNsNotification.translate(m)
        var view: [String: JSONValue] = [
            "platform": .string(Platform.ios.rawValue),
            "headers": .object(apns.headers.mapValues { .string($0) }),
            "payload": .object(apns.payload),
            "payload_bytes": .int(Int64(apns.payloadBytes)),
        ]
        // An alert for a backgrounded app is the system's; a background push wakes the app.
        view["presentation"] = .string((apns.isAlert && m.appInBackground ? Presentation.system : .app).rawValue)
        if apns.wakesApp { view["wakes_app"] = .bool(true) }
        if let image = apns.serviceExtensionImage { view["image"] = .string(image) }
        return .object(view)
    }
}
