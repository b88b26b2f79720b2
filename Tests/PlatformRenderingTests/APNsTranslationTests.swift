import PlatformRendering
import PushDomain
import Testing

/// The iOS translation, field by field (docs/platforms.md, "iOS").
@Suite struct APNsTranslationTests {
    static func message(_ payload: String, blocks: String? = nil, at: Int64 = 1_700_000_000_000) -> DeliveredMessage {
        DeliveredMessage(payloadJSON: payload, platformBlocksJSON: blocks, acceptedAtMillis: at, app: "com.example.app",
                         appInBackground: true)
    }

    struct Row: Sendable, CustomStringConvertible {
        var payload: String
        var blocks: String?
        /// A path into the APNs payload ("aps.alert.title") and the JSON expected there (nil: absent).
        var path: String
        var expected: String?
        var description: String { "\(path) from \(payload) \(blocks ?? "")" }
    }

    static let base = #""message_id":"0:1%ab","priority":"high","ttl":60"#
    static let rows: [Row] = [
        Row(payload: "{\(base),\"notification\":{\"title\":\"T\"}}", path: "aps.alert.title", expected: #""T""#),
        Row(payload: "{\(base),\"notification\":{\"body\":\"B\"}}", path: "aps.alert.body", expected: #""B""#),
        Row(payload: "{\(base),\"notification\":{\"subtitle\":\"S\"}}", path: "aps.alert.subtitle", expected: #""S""#),
        Row(payload: "{\(base),\"notification\":{\"body_loc_key\":\"K\"}}", path: "aps.alert.loc-key", expected: #""K""#),
        Row(payload: "{\(base),\"notification\":{\"body_loc_args\":\"[\\\"a\\\",\\\"b\\\"]\"}}", path: "aps.alert.loc-args",
            expected: #"["a","b"]"#),
        Row(payload: "{\(base),\"notification\":{\"title_loc_key\":\"TK\",\"title_loc_args\":[\"x\"]}}",
            path: "aps.alert.title-loc-args", expected: #"["x"]"#),
        Row(payload: "{\(base),\"notification\":{\"title_loc_key\":\"TK\"}}", path: "aps.alert.title-loc-key", expected: #""TK""#),
        Row(payload: "{\(base),\"notification\":{\"badge\":\"3\"}}", path: "aps.badge", expected: "3"),
        Row(payload: "{\(base),\"notification\":{\"badge\":7}}", path: "aps.badge", expected: "7"),
        Row(payload: "{\(base),\"notification\":{\"badge\":\"x\"}}", path: "aps.badge", expected: nil),
        Row(payload: "{\(base),\"notification\":{\"sound\":\"default\"}}", path: "aps.sound", expected: #""default""#),
        Row(payload: "{\(base),\"notification\":{\"click_action\":\"REPLY\"}}", path: "aps.category", expected: #""REPLY""#),
        Row(payload: "{\(base),\"content_available\":true}", path: "aps.content-available", expected: "1"),
        Row(payload: "{\(base),\"content_available\":false}", path: "aps.content-available", expected: nil),
        Row(payload: "{\(base),\"mutable_content\":true,\"notification\":{\"title\":\"T\"}}", path: "aps.mutable-content", expected: "1"),
        Row(payload: "{\(base),\"data\":{\"score\":\"3-1\"}}", path: "score", expected: #""3-1""#),
        Row(payload: "{\(base),\"data\":{\"score\":\"3-1\"}}", path: "gcm.message_id", expected: #""0:1%ab""#),
        Row(payload: "{\(base),\"notification\":{\"title\":\"T\",\"image\":\"https://i/x.png\"}}", path: "fcm_options.image",
            expected: #""https://i/x.png""#),
        // android's keys never reach iOS.
        Row(payload: "{\(base),\"notification\":{\"title\":\"T\",\"color\":\"red\",\"android_channel_id\":\"c\"}}",
            path: "aps.alert.color", expected: nil),
        // v1: the apns block wins, key by key; the alert is merged.
        Row(payload: "{\(base),\"notification\":{\"title\":\"T\",\"body\":\"B\"}}",
            blocks: #"{"apns":{"payload":{"aps":{"alert":{"title":"iOS title"}}}}}"#, path: "aps.alert", expected: #"{"body":"B","title":"iOS title"}"#),
        Row(payload: "{\(base),\"notification\":{\"title\":\"T\"}}",
            blocks: #"{"apns":{"payload":{"aps":{"alert":"plain"}}}}"#, path: "aps.alert", expected: #""plain""#),
        Row(payload: "{\(base),\"notification\":{\"title\":\"T\"}}",
            blocks: #"{"apns":{"payload":{"aps":{"thread-id":"chat","badge":2},"custom":{"k":1}}}}"#, path: "aps.thread-id", expected: #""chat""#),
        Row(payload: "{\(base),\"notification\":{\"title\":\"T\"}}",
            blocks: #"{"apns":{"payload":{"custom":{"k":1}}}}"#, path: "custom", expected: #"{"k":1}"#),
        Row(payload: "{\(base),\"notification\":{\"title\":\"T\"}}",
            blocks: #"{"apns":{"fcm_options":{"image":"https://i/a.png"}}}"#, path: "fcm_options.image", expected: #""https://i/a.png""#),
        // v1 with android overrides: iOS renders the cross-platform fields.
        Row(payload: "{\(base),\"notification\":{\"title\":\"Android title\"},\"data\":{\"a\":\"android\"}}",
            blocks: #"{"notification":{"title":"Shared"},"data":{"a":"shared"}}"#, path: "aps.alert.title", expected: #""Shared""#),
        Row(payload: "{\(base),\"notification\":{\"title\":\"Android title\"},\"data\":{\"a\":\"android\"}}",
            blocks: #"{"notification":{"title":"Shared"},"data":{"a":"shared"}}"#, path: "a", expected: #""shared""#),
        Row(payload: "{\(base),\"notification\":{\"title\":\"Android only\"}}", blocks: #"{"notification":null}"#,
            path: "aps.alert", expected: nil),
    ]

    @Test(arguments: rows) func field(_ row: Row) throws {
        let apns = APNsNotification.translate(Self.message(row.payload, blocks: row.blocks))
        var value: JSONValue? = .object(apns.payload)
        var rest = Substring(row.path)
        // `gcm.message_id` is one key with a dot in it.
        if rest == "gcm.message_id" { value = apns.payload["gcm.message_id"]; rest = "" }
        while !rest.isEmpty {
            let key = rest.prefix { $0 != "." }
            rest = rest.dropFirst(key.count).drop { $0 == "." }
            value = value?[String(key)]
        }
        #expect(value?.encoded() == row.expected)
    }

    struct HeaderRow: Sendable, CustomStringConvertible {
        var payload: String
        var blocks: String?
        var header: String
        var expected: String?
        var description: String { "\(header) from \(payload) \(blocks ?? "")" }
    }

    static let headerRows: [HeaderRow] = [
        HeaderRow(payload: #"{"priority":"high","ttl":60,"notification":{"title":"T"}}"#, header: "apns-priority", expected: "10"),
        HeaderRow(payload: #"{"priority":"normal","ttl":60,"notification":{"title":"T"}}"#, header: "apns-priority", expected: "5"),
        // A background push goes at 5 whatever the priority.
        HeaderRow(payload: #"{"priority":"high","ttl":60,"content_available":true}"#, header: "apns-priority", expected: "5"),
        HeaderRow(payload: #"{"priority":"high","ttl":60,"content_available":true}"#, header: "apns-push-type", expected: "background"),
        HeaderRow(payload: #"{"priority":"high","ttl":60,"notification":{"title":"T"}}"#, header: "apns-push-type", expected: "alert"),
        HeaderRow(payload: #"{"priority":"high","ttl":60,"notification":{"title":"T"}}"#, header: "apns-expiration", expected: "1700000060"),
        HeaderRow(payload: #"{"priority":"high","ttl":0,"notification":{"title":"T"}}"#, header: "apns-expiration", expected: "0"),
        HeaderRow(payload: #"{"priority":"high","ttl":60,"collapse_key":"score"}"#, header: "apns-collapse-id", expected: "score"),
        HeaderRow(payload: #"{"priority":"high","ttl":60}"#, header: "apns-topic", expected: "com.example.app"),
        HeaderRow(payload: #"{"priority":"high","ttl":60,"notification":{"title":"T"}}"#,
                  blocks: #"{"apns":{"headers":{"apns-priority":"5","apns-expiration":"1800000000"}}}"#,
                  header: "apns-priority", expected: "5"),
        HeaderRow(payload: #"{"priority":"high","ttl":60,"notification":{"title":"T"}}"#,
                  blocks: #"{"apns":{"headers":{"apns-expiration":"1800000000"}}}"#, header: "apns-expiration", expected: "1800000000"),
    ]

    @Test(arguments: headerRows) func header(_ row: HeaderRow) {
        let apns = APNsNotification.translate(Self.message(row.payload, blocks: row.blocks))
        #expect(apns.headers[row.header] == row.expected)
    }

    @Test func payloadLimit() {
        let small = APNsNotification.translate(Self.message(#"{"data":{"k":"v"}}"#))
        #expect(small.fitsAPNs)
        let big = String(repeating: "x", count: 4000)
        let large = APNsNotification.translate(Self.message("{\"data\":{\"k\":\"\(big)\"},\"notification\":{\"title\":\"\(String(repeating: "t", count: 200))\"}}"))
        #expect(large.payloadBytes > APNsNotification.maximumPayloadBytes)
        #expect(!large.fitsAPNs)
        #expect(large.payloadBytes == large.payloadJSON.utf8.count)
    }

    @Test func serviceExtensionImageNeedsMutableContent() {
        let seed = #"{"apns":{"payload":{"aps":{"mutable-content":1}},"fcm_options":{"image":"https://foo.bar/pizza-monster.png"}}}"#
        let with = APNsNotification.translate(Self.message(#"{"notification":{"title":"Sparky says hello!"}}"#, blocks: seed))
        #expect(with.serviceExtensionImage == "https://foo.bar/pizza-monster.png")
        let without = APNsNotification.translate(Self.message(#"{"notification":{"title":"T","image":"https://i/x.png"}}"#))
        #expect(without.serviceExtensionImage == nil)
        // A data-only push shows nothing: no extension runs.
        let silent = APNsNotification.translate(Self.message(#"{"content_available":true,"mutable_content":true}"#,
                                                             blocks: #"{"apns":{"fcm_options":{"image":"https://i/x.png"}}}"#))
        #expect(silent.serviceExtensionImage == nil)
        #expect(silent.wakesApp)
    }
}
