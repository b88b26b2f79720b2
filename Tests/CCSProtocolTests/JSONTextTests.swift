import Foundation
import Testing
@testable import PushDomain

/// `JSONText.isEmbeddableObject` says yes only where the parser accepts the text with an object under
/// the key, and where the text can go into other JSON as it is; a no sends the caller to the parser.
@Suite("JSONText: JSON passed on as it was sent")
struct JSONTextTests {
    func embeddable(_ text: String) -> Bool {
        JSONText.isEmbeddableObject(Array(text.utf8), withObjectAt: "aps")
    }

    /// What a yes promises, checked against the parser.
    func promise(_ bytes: [UInt8]) {
        guard JSONText.isEmbeddableObject(bytes, withObjectAt: "aps") else { return }
        let text = String(decoding: bytes, as: UTF8.self)
        let parsed = try? JSONValue.parse(text)
        #expect(parsed?["aps"]?.objectValue != nil, "said embeddable: \(text)")
        // Embedded in other JSON text, it reads back as the parser read it alone.
        let outer = try? JSONValue.parse(#"{"payload":"# + text + "}")
        #expect(outer?["payload"] == parsed, "embedded: \(text)")
        // A strict parser (Foundation's) reads it too: no raw control characters, valid UTF-8.
        #expect((try? JSONSerialization.jsonObject(with: Data(bytes))) != nil, "strict: \(text)")
    }

    @Test func payloadsAsProvidersSendThemPass() {
        for text in [
            #"{"aps":{"alert":"Hello","badge":4,"sound":"default"}}"#,
            #"{"aps":{"alert":{"title":"Ti","body":"Bo","loc-args":["a",1,2.5e3,-0.5,true,null]}},"k":"v"}"#,
            "{\n  \"aps\" : { \"content-available\" : 1 },\n  \"n\" : [ ]\n}\n",
            #"{"aps":{"alert":"caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \n"},"x":{"y":{"z":[[{}]]}}}"#,
            #"{"aps":{"alert":"Grüße 🎉"}}"#,
            #"{"aps":{},"aps2":1}"#,
            #"{"n":9223372036854775807,"aps":{"badge":123456789012345678}}"#,
        ] {
            #expect(embeddable(text), "\(text)")
            promise(Array(text.utf8))
        }
    }

    @Test func notAnObjectUnderTheKeyOrNotJSONIsNo() {
        for text in [
            "", "   ", "[]", "{}", #"{"aps":1}"#, #"{"aps":[]}"#, #"{"aps":"x"}"#, #"{"alert":{}}"#,
            #"{"aps":{}"#, #"{"aps":{}}}"#, #"{"aps":{}} x"#, #"{"aps":{},}"#, #"{"aps":{"a":01}}"#,
            #"{"aps":{"a":1.}}"#, #"{"aps":{"a":tru}}"#, #"{"aps":{"a":"x\q"}}"#, #"{"aps":{"a":"\u12G4"}}"#,
            #"{'aps':{}}"#, #"{"aps":{}, "aps":2}"#, #"{"aps":{"a":1,"a":1}}"#,  // a key twice: the parser refuses it
        ] {
            #expect(!embeddable(text), "\(text)")
        }
    }

    @Test func whatTheParserWouldChangeGoesToTheParser() {
        // Accepted by the parser, but not to be embedded as it is: raw control characters, lone
        // surrogates (U+FFFD after parsing), invalid UTF-8, an escaped key (it might spell the key),
        // numbers the parser refuses.
        #expect(!embeddable("{\"aps\":{\"alert\":\"tab\there\"}}"))
        #expect(!embeddable(#"{"aps":{"alert":"\ud83d"}}"#))
        #expect(!embeddable(#"{"aps":{"alert":"\ude00x"}}"#))
        #expect(!embeddable(#"{"\u0061ps":{}}"#))
        #expect(!embeddable(#"{"aps":{"n":1e400}}"#))
        #expect(!embeddable(#"{"aps":{"n":-1e999}}"#))
        #expect(!JSONText.isEmbeddableObject([0x7B, 0x22, 0x61, 0x70, 0x73, 0x22, 0x3A, 0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D, 0x7D],
                                             withObjectAt: "aps"))
        #expect((try? JSONValue.parse(#"{"\u0061ps":{}}"#))?["aps"] != nil)  // the parser's way still finds it
    }

    @Test func nestingIsBoundedAsTheParsersIs() {
        let deep = #"{"aps":{"#  + String(repeating: #""a":{"#, count: JSONParser.maximumDepth - 2) + "}"
            + String(repeating: "}", count: JSONParser.maximumDepth - 2) + "}"
        #expect(embeddable(deep) == ((try? JSONValue.parse(deep)) != nil))
        let deeper = #"{"aps":{"#  + String(repeating: #""a":{"#, count: JSONParser.maximumDepth) + "}"
            + String(repeating: "}", count: JSONParser.maximumDepth) + "}"
        #expect(!embeddable(deeper))
        #expect((try? JSONValue.parse(deeper)) == nil)
    }

    @Test func theFuzzCorporaKeepThePromise() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fixtures/fuzz")
        var checked = 0
        for corpus in ["json", "apns-frames", "http-bodies"] {
            let dir = root.appendingPathComponent(corpus)
            for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
                let bytes = Array(try Data(contentsOf: dir.appendingPathComponent(name)))
                // Every suffix from each `{`: the payloads inside frames and bodies, and cut ones.
                for (i, b) in bytes.enumerated() where b == UInt8(ascii: "{") {
                    for end in [bytes.count, (i + bytes.count) / 2] where end > i {
                        promise(Array(bytes[i..<end]))
                        checked += 1
                    }
                }
            }
        }
        #expect(checked > 10)
    }
}
