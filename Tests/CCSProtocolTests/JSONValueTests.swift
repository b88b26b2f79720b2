import Testing
@testable import CCSProtocol
import PushDomain

@Suite("JSONValue parsing")
struct JSONParsingTests {
    @Test func parsesAllValueKinds() throws {
        let value = try JSONValue.parse(#"{"a":null,"b":true,"c":false,"d":12,"e":-1.5,"f":"x","g":[1,"2"],"h":{}}"#)
        #expect(value == .object([
            "a": .null, "b": .bool(true), "c": .bool(false), "d": .int(12), "e": .double(-1.5),
            "f": .string("x"), "g": .array([.int(1), .string("2")]), "h": .object([:]),
        ]))
    }

    @Test func integersStayIntegers() throws {
        #expect(try JSONValue.parse("600") == .int(600))
        #expect(try JSONValue.parse("-0") == .int(0))
        #expect(try JSONValue.parse("9223372036854775807") == .int(.max))
        #expect(try JSONValue.parse("600.0") == .double(600))
        #expect(try JSONValue.parse("6e2") == .double(600))
        // Beyond Int64: a double, not an error.
        #expect(try JSONValue.parse("92233720368547758070") == .double(9.223372036854775807e19))
    }

    @Test func numberGrammarIsStrict() {
        for bad in ["01", "+1", ".5", "1.", "1e", "-", "0x10", "NaN", "Infinity", "1e999"] {
            #expect(throws: JSONParseError.self, "\(bad)") { try JSONValue.parse(bad) }
        }
    }

    @Test func decodesEscapes() throws {
        let value = try JSONValue.parse(#""\"\\\/\b\f\n\r\t\u0041\u00e9\u20ac""#)
        #expect(value == .string("\"\\/\u{08}\u{0C}\n\r\tAé€"))
    }

    @Test func decodesSurrogatePairsAndReplacesLoneSurrogates() throws {
        #expect(try JSONValue.parse(#""\ud83d\ude00""#) == .string("😀"))
        #expect(try JSONValue.parse(#""a\ud83db""#) == .string("a\u{FFFD}b"))
        #expect(try JSONValue.parse(#""\ude00""#) == .string("\u{FFFD}"))
        #expect(try JSONValue.parse(#""\ud83d\u0041""#) == .string("\u{FFFD}A"))
    }

    @Test func keepsNonASCIIText() throws {
        #expect(try JSONValue.parse(#"{"키":"값 😀"}"#) == .object(["키": .string("값 😀")]))
    }

    @Test func acceptsRawControlCharactersInStrings() throws {
        #expect(try JSONValue.parse("\"a\tb\nc\"") == .string("a\tb\nc"))
    }

    @Test func skipsSurroundingWhitespace() throws {
        #expect(try JSONValue.parse(" \n\t {\"a\" : [ 1 , 2 ] } \r\n ") == .object(["a": [1, 2]]))
    }

    @Test func aKeyNamedTwiceIsRefusedAtAnyDepth() throws {
        #expect(throws: JSONParseError(reason: #"Duplicate field "a""#, position: 7, duplicateKey: .init(name: "a", depth: 1))) {
            try JSONValue.parse(#"{"a":1,"a":2}"#)
        }
        let nested = #"{"m":{"b":[{"c":1,"c":1}]}}"#
        #expect(throws: JSONParseError(reason: #"Duplicate field "c""#, position: 18, duplicateKey: .init(name: "c", depth: 4))) {
            try JSONValue.parse(nested)
        }
        // Spelled differently, the same key: still one key.
        #expect(throws: JSONParseError.self) { try JSONValue.parse(#"{"a":1,"\u0061":2}"#) }
        // Only to find a refused message's id: the last one, then.
        #expect(try JSONValue.parse(#"{"a":1,"a":2}"#, duplicateKeys: .lastWins) == .object(["a": 2]))
        #expect(try JSONValue.parse(#"{"a":{"a":1},"b":[{"a":1},{"a":2}]}"#)["a"] == .object(["a": 1]))
    }

    @Test func bytesThatAreNotUTF8AreAnError() throws {
        let bad: [UInt8] = Array(#"{"app":"x"#.utf8) + [0xFF, 0xFE] + Array(#""}"#.utf8)
        #expect(Self.parse(bytes: bad) == .failure(JSONParseError(reason: "Invalid UTF-8 (RFC 8259 §8.1)", position: 0)))
        let escaped: [UInt8] = Array(#"{"app":"x\n"#.utf8) + [0xC3] + Array(#""}"#.utf8)  // a cut 2-byte sequence after an escape
        #expect(Self.parse(bytes: escaped) == .failure(JSONParseError(reason: "Invalid UTF-8 (RFC 8259 §8.1)", position: 0)))
        let good = Array(#"{"app":"caf\#u{E9} \#u{1F600}"}"#.utf8)
        #expect(Self.parse(bytes: good) == .success(.object(["app": .string("caf\u{E9} \u{1F600}")])))
    }

    static func parse(bytes: [UInt8]) -> Result<JSONValue, JSONParseError> {
        bytes.withUnsafeBytes { raw in
            do throws(JSONParseError) { return .success(try JSONValue.parse(utf8: raw)) } catch { return .failure(error) }
        }
    }

    @Test func reportsErrorsWithPosition() {
        #expect(throws: JSONParseError(reason: "Unexpected character (x)", position: 5)) {
            try JSONValue.parse(#"{"a":x}"#)
        }
        #expect(throws: JSONParseError(reason: "Unexpected end of input", position: 0)) {
            try JSONValue.parse("")
        }
        #expect(throws: JSONParseError(reason: "Unexpected end of input", position: 6)) {
            try JSONValue.parse(#"{"a":1"#)
        }
        #expect(throws: JSONParseError(reason: "Unexpected character (})", position: 7)) {
            try JSONValue.parse(#"{"a":1,}"#)
        }
        #expect(throws: JSONParseError(reason: "Unexpected character (é)", position: 3)) {
            try JSONValue.parse("{} é")
        }
        #expect(throws: JSONParseError.self) { try JSONValue.parse(#""abc"#) }
        #expect(throws: JSONParseError.self) { try JSONValue.parse(#""\x""#) }
        #expect(throws: JSONParseError.self) { try JSONValue.parse(#""\u12G4""#) }
        #expect(throws: JSONParseError.self) { try JSONValue.parse("tru") }
        #expect(throws: JSONParseError.self) { try JSONValue.parse("{'a':1}") }
        #expect(throws: JSONParseError.self) { try JSONValue.parse("[1 2]") }
    }

    @Test func limitsNestingDepth() throws {
        let ok = String(repeating: "[", count: 128) + String(repeating: "]", count: 128)
        _ = try JSONValue.parse(ok)
        let deep = String(repeating: "[", count: 100_000)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deep) }
        let deepObjects = String(repeating: #"{"a":"#, count: 129) + "1" + String(repeating: "}", count: 129)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deepObjects) }
    }

    @Test func parseErrorDescription() {
        #expect(JSONParseError(reason: "Unexpected character (x)", position: 5).description
            == "Unexpected character (x) at position 5")
    }
}

@Suite("JSONValue encoding")
struct JSONEncodingTests {
    @Test func compactWithSortedKeys() {
        let value: JSONValue = ["b": 1, "a": [true, nil, "x"], "c": ["z": 1, "y": 2.5]]
        #expect(value.encoded() == #"{"a":[true,null,"x"],"b":1,"c":{"y":2.5,"z":1}}"#)
    }

    @Test func keysSortByUTF8Bytes() {
        let value: JSONValue = ["é": 1, "z": 2, "Z": 3, "a": 4]
        #expect(value.encoded() == #"{"Z":3,"a":4,"z":2,"é":1}"#)
    }

    @Test func escapesPerRFC8259() {
        let value = JSONValue.string("q\" b\\ s/ \u{08}\u{0C}\n\r\t \u{01}\u{1F} é😀 \u{7F}")
        #expect(value.encoded() == #""q\" b\\ s/ \b\f\n\r\t \u0001\u001f é😀 \#u{7F}""#)
    }

    @Test func integersHaveNoFraction() {
        #expect(JSONValue.int(600).encoded() == "600")
        #expect(JSONValue.double(600).encoded() == "600")
        #expect(JSONValue.double(-2.5).encoded() == "-2.5")
        #expect(JSONValue.double(0.1).encoded() == "0.1")
        #expect(JSONValue.double(1e300).encoded() == "1e+300")
        #expect(JSONValue.double(.infinity).encoded() == "null")
        #expect(JSONValue.number(3) == .int(3))
        #expect(JSONValue.number(3.5) == .double(3.5))
    }

    @Test func roundTrips() throws {
        let text = #"{"a":[1,2.5,"x\n",{"k":null}],"b":{"c":false},"d":"\u00e9/"}"#
        let value = try JSONValue.parse(text)
        #expect(try JSONValue.parse(value.encoded()) == value)
        #expect(value.encoded() == #"{"a":[1,2.5,"x\n",{"k":null}],"b":{"c":false},"d":"é/"}"#)
    }

    @Test func accessors() throws {
        let value = try JSONValue.parse(#"{"s":"x","i":5,"d":5.0,"f":5.5,"b":true,"o":{},"a":[]}"#)
        #expect(value["s"]?.stringValue == "x")
        #expect(value["i"]?.intValue == 5)
        #expect(value["d"]?.intValue == 5)
        #expect(value["f"]?.intValue == nil)
        #expect(value["f"]?.numberValue == 5.5)
        #expect(value["b"]?.boolValue == true)
        #expect(value["o"]?.objectValue == [:])
        #expect(value["a"]?.arrayValue == [])
        #expect(value["missing"] == nil)
        #expect(JSONValue.string("x")["k"] == nil)
    }
}

@Suite("JSONObjectWriter")
struct JSONObjectWriterTests {
    @Test func keepsInsertionOrder() {
        var writer = JSONObjectWriter()
        writer.add("z", "last\"first")
        writer.add("a", 1)
        writer.add("m", Int64(-2))
        writer.add("b", false)
        writer.add("j", json: ["y": 1, "x": [nil]])
        writer.add("s", stringMap: ["b": "2", "a": "1"])
        writer.add("r", rawJSON: "[1]")
        #expect(writer.finished() == #"{"z":"last\"first","a":1,"m":-2,"b":false,"j":{"x":[null],"y":1},"s":{"a":"1","b":"2"},"r":[1]}"#)
    }

    @Test func emptyObject() {
        #expect(JSONObjectWriter().finished() == "{}")
    }
}
