import DeviceSimulator
import NIOCore
import Testing

/// What each platform's notification code accepts as an image (docs/platforms.md, "Images").
@Suite struct ImageRulesTests {
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13]
    static let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0, 16]
    static let webp: [UInt8] = Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WEBP".utf8)
    static let html: [UInt8] = Array("<!doctype html><html></html>".utf8)

    struct Row: Sendable, CustomStringConvertible {
        var platform: String
        var bytes: [UInt8]
        var contentType: String?
        var shown: Bool
        var description: String { "\(platform) \(contentType ?? "no type") \(bytes.prefix(4)) → \(shown)" }
    }

    static let rows: [Row] = [
        // Android decodes the bytes, whatever the Content-Type says.
        Row(platform: "android", bytes: png, contentType: "image/png", shown: true),
        Row(platform: "android", bytes: png, contentType: "application/octet-stream", shown: true),
        Row(platform: "android", bytes: webp, contentType: nil, shown: true),
        Row(platform: "android", bytes: html, contentType: "image/png", shown: false),
        // iOS attaches JPEG, PNG and GIF by their MIME type, and the bytes must be one.
        Row(platform: "ios", bytes: jpeg, contentType: "image/jpeg", shown: true),
        Row(platform: "ios", bytes: png, contentType: "image/png; charset=binary", shown: true),
        Row(platform: "ios", bytes: png, contentType: "application/octet-stream", shown: false),
        Row(platform: "ios", bytes: webp, contentType: "image/webp", shown: false),
        Row(platform: "ios", bytes: html, contentType: "text/html", shown: false),
        // A browser shows what it decodes.
        Row(platform: "web", bytes: webp, contentType: "image/webp", shown: true),
        Row(platform: "web", bytes: html, contentType: "text/html", shown: false),
        Row(platform: "web", bytes: [], contentType: "image/png", shown: false),
    ]

    @Test(arguments: rows) func shown(_ row: Row) {
        let rules = ImageRules.forPlatform(row.platform)
        #expect(rules.shows(ByteBuffer(bytes: row.bytes), contentType: row.contentType) == row.shown)
    }

    @Test func limits() {
        #expect(ImageRules.android.maximumBytes == 1 << 20)
        #expect(ImageRules.android.timeLimit == .seconds(5))
        #expect(ImageRules.ios.timeLimit == .seconds(30))
        #expect(ImageRules.forPlatform("web") == .web)
    }

    @Test func anImageOutcomeAsTheEventShowsIt() {
        let o = ImageOutcome(url: "http://i/x.png", status: 404, bytes: 9, contentType: "text/plain", shown: false,
                             reason: "http_status")
        #expect(o.json.encoded() == #"{"bytes":9,"content_type":"text/plain","reason":"http_status","shown":false,"status":404,"url":"http://i/x.png"}"#)
    }
}
