import PlatformRendering
import PushDomain
import Testing

/// Android and web views, field by field, and the seed 003 message on all three platforms.
@Suite struct PlatformViewTests {
    static func render(_ payload: String, blocks: String? = nil, _ platform: Platform, background: Bool = true) -> JSONValue {
        PlatformView.render(DeliveredMessage(payloadJSON: payload, platformBlocksJSON: blocks, acceptedAtMillis: 1_700_000_000_000,
                                             app: "com.example.app", appInBackground: background), for: platform)
    }

    static func at(_ value: JSONValue, _ path: String) -> JSONValue? {
        var v: JSONValue? = value
        for key in path.split(separator: ".") { v = v?[String(key)] }
        return v
    }

    struct Row: Sendable, CustomStringConvertible {
        var platform: Platform
        var payload: String
        var blocks: String?
        var path: String
        var expected: String?
        var description: String { "\(platform) \(path) from \(payload) \(blocks ?? "")" }
    }

    static let rows: [Row] = [
        Row(platform: .android, payload: #"{"notification":{"title":"T","body":"B"}}"#, path: "notification.title", expected: #""T""#),
        Row(platform: .android, payload: #"{"notification":{"title":"T","android_channel_id":"news"}}"#, path: "notification.channel_id", expected: #""news""#),
        Row(platform: .android, payload: ##"{"notification":{"title":"T","color":"#00ff00"}}"##, path: "notification.color", expected: ##""#00ff00""##),
        Row(platform: .android, payload: #"{"notification":{"title":"T","icon":"ic","sound":"s","tag":"g","click_action":"OPEN"}}"#,
            path: "notification.click_action", expected: #""OPEN""#),
        Row(platform: .android, payload: #"{"notification":{"title":"T","badge":"1","subtitle":"S"}}"#, path: "notification.badge", expected: nil),
        Row(platform: .android, payload: #"{"notification":{"body_loc_key":"k","body_loc_args":"[\"1\"]"}}"#,
            path: "notification.body_loc_args", expected: #"["1"]"#),
        Row(platform: .android, payload: #"{"data":{"a":"b"},"collapse_key":"c","priority":"normal","original_priority":"normal"}"#,
            path: "collapse_key", expected: #""c""#),
        Row(platform: .android, payload: #"{"data":{"a":"b"},"priority":"normal","original_priority":"normal"}"#,
            path: "original_priority", expected: #""normal""#),
        Row(platform: .android, payload: #"{"data":{"a":"b"},"priority":"normal"}"#, path: "presentation", expected: #""app""#),
        Row(platform: .android, payload: #"{"notification":{"title":"T"}}"#, path: "presentation", expected: #""system""#),
        Row(platform: .android, payload: #"{"notification":{"title":"T","image":"https://i/x.png"}}"#, path: "image", expected: #""https://i/x.png""#),
        Row(platform: .web, payload: #"{"notification":{"title":"T","body":"B","icon":"https://i/icon.png"}}"#, path: "notification.icon",
            expected: #""https://i/icon.png""#),
        Row(platform: .web, payload: #"{"notification":{"title":"T","click_action":"https://example.com/open"}}"#, path: "link",
            expected: #""https://example.com/open""#),
        Row(platform: .web, payload: #"{"notification":{"title":"T"}}"#, blocks: #"{"webpush":{"fcm_options":{"link":"https://e.com/l"}}}"#,
            path: "link", expected: #""https://e.com/l""#),
        Row(platform: .web, payload: #"{"notification":{"title":"T"}}"#, blocks: #"{"webpush":{"notification":{"title":"Web","requireInteraction":true}}}"#,
            path: "notification.title", expected: #""Web""#),
        Row(platform: .web, payload: #"{"notification":{"title":"T"}}"#, blocks: #"{"webpush":{"notification":{"requireInteraction":true}}}"#,
            path: "notification.requireInteraction", expected: "true"),
        Row(platform: .web, payload: #"{"data":{"a":"1"}}"#, blocks: #"{"webpush":{"data":{"b":"2"}}}"#, path: "data", expected: #"{"a":"1","b":"2"}"#),
        Row(platform: .web, payload: #"{"ttl":600,"priority":"high","notification":{"title":"T"}}"#, path: "headers.TTL", expected: #""600""#),
        Row(platform: .web, payload: #"{"ttl":600,"priority":"normal","data":{}}"#, path: "headers.Urgency", expected: #""normal""#),
        Row(platform: .web, payload: #"{"ttl":600,"priority":"high","notification":{"title":"T"}}"#, blocks: #"{"webpush":{"headers":{"TTL":"60","Urgency":"low"}}}"#,
            path: "headers.Urgency", expected: #""low""#),
        Row(platform: .web, payload: #"{"notification":{"title":"T"}}"#, blocks: #"{"webpush":{"headers":{"image":"https://i/h.png"}}}"#,
            path: "notification.image", expected: #""https://i/h.png""#),
        Row(platform: .web, payload: #"{"notification":{"title":"T","image":"https://i/n.png"}}"#, blocks: #"{"webpush":{"headers":{"image":"https://i/h.png"}}}"#,
            path: "notification.image", expected: #""https://i/n.png""#),
        Row(platform: .web, payload: #"{"data":{"a":"1"}}"#, path: "presentation", expected: #""app""#),
    ]

    @Test(arguments: rows) func field(_ row: Row) {
        #expect(Self.at(Self.render(row.payload, blocks: row.blocks, row.platform), row.path)?.encoded() == row.expected)
    }

    /// Seed 003's REST body, as the v1 decoder stores it: android's image merged into the Android
    /// notification, the apns and webpush blocks kept, the shared notification beside them.
    @Test func seed003OnEveryPlatform() {
        let payload = #"{"from":"/topics/industry-tech","message_id":"0:1%ab","notification":{"image":"https://foo.bar/pizza-monster.png","title":"Sparky says hello!"},"original_priority":"high","priority":"high","ttl":2419200}"#
        let blocks = #"{"android":{"notification":{"image":"https://foo.bar/pizza-monster.png"}},"apns":{"fcm_options":{"image":"https://foo.bar/pizza-monster.png"},"payload":{"aps":{"mutable-content":1}}},"notification":{"title":"Sparky says hello!"},"webpush":{"headers":{"image":"https://foo.bar/pizza-monster.png"}}}"#
        let image = "https://foo.bar/pizza-monster.png"
        let android = Self.render(payload, blocks: blocks, .android)
        #expect(Self.at(android, "notification.title")?.stringValue == "Sparky says hello!")
        #expect(android["image"]?.stringValue == image)
        let ios = Self.render(payload, blocks: blocks, .ios)
        #expect(Self.at(ios, "payload.aps.alert.title")?.stringValue == "Sparky says hello!")
        #expect(Self.at(ios, "payload.aps.mutable-content")?.intValue == 1)
        #expect(ios["image"]?.stringValue == image)
        let web = Self.render(payload, blocks: blocks, .web)
        #expect(Self.at(web, "notification.title")?.stringValue == "Sparky says hello!")
        #expect(web["image"]?.stringValue == image)
        // In the foreground Android and web hand the message to the app (nothing downloads it);
        // iOS's service extension runs before presentation either way.
        #expect(Self.render(payload, blocks: blocks, .android, background: false)["image"] == nil)
        #expect(Self.render(payload, blocks: blocks, .web, background: false)["image"] == nil)
        #expect(Self.render(payload, blocks: blocks, .ios, background: false)["image"]?.stringValue == image)
    }

    @Test func webSubscriptionChecks() {
        let key = "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM"
        let auth = "tBHItJI5svbpez7KI4CCXg"
        let good = JSONValue.object(["endpoint": .string("https://fcm.googleapis.com/fcm/send/abc"),
                                     "keys": .object(["p256dh": .string(key), "auth": .string(auth)])])
        #expect((try? WebPushSubscription.parse(good).get())?.auth == auth)
        let cases: [JSONValue] = [
            .string("x"),
            .object(["keys": .object([:])]),
            .object(["endpoint": .string("http://insecure/x"), "keys": .object(["p256dh": .string(key), "auth": .string(auth)])]),
            .object(["endpoint": .string("https://e/x"), "keys": .object(["p256dh": .string("AAAA"), "auth": .string(auth)])]),
            .object(["endpoint": .string("https://e/x"), "keys": .object(["p256dh": .string(key), "auth": .string("!!")])]),
            .object(["endpoint": .string("https://e/x"), "keys": .object(["p256dh": .string(key)])]),
        ]
        for bad in cases {
            guard case .failure = WebPushSubscription.parse(bad) else { Issue.record("accepted \(bad.encoded())"); continue }
        }
    }
}
