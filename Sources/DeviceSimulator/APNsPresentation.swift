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
    }

    /// The `apns` event of `ccs-emulator device`.
    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "payload": payload, "content_available": .bool(contentAvailable), "mutable_content": .bool(mutableContent),
        ]
        if let alert { fields["alert"] = alert }
        if let badge { fields["badge"] = .int(badge) }
        if let sound { fields["sound"] = sound }
        return .object(fields)
    }
}
