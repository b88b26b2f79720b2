/// JSON text that can be kept as it was sent: checked byte by byte, without building a `JSONValue`.
///
/// A payload that is only passed on (an APNs gateway frame's payload, stored for the device as the
/// provider wrote it) needs to be known to be JSON, not parsed into a tree and encoded again: that
/// round trip was a fifth of the event loop's time per APNs notification (docs/benchmarks.md).
public enum JSONText {
    /// Whether `bytes` are one JSON object, with an object under `key`, that `JSONValue.parse`
    /// accepts (no key named twice in one object, as it refuses), and that other JSON
    /// text may embed as it is: valid UTF-8, no raw control character in a string, no escaped lone
    /// surrogate (the parser would make it U+FFFD), no number the parser refuses as out of range.
    ///
    /// False does not mean the text is invalid: parse it then (an escape in a key of the outer object,
    /// a raw tab in a string, … go that slower way, which decides exactly as before).
    public static func isEmbeddableObject(_ bytes: UnsafeBufferPointer<UInt8>, withObjectAt key: StaticString) -> Bool {
        var scanner = Scanner(bytes: bytes)
        return scanner.document(key: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
    }

    public static func isEmbeddableObject(_ bytes: [UInt8], withObjectAt key: StaticString) -> Bool {
        bytes.withUnsafeBufferPointer { isEmbeddableObject($0, withObjectAt: key) }
    }

    /// The parser's grammar (`JSONParser`), checking instead of building. Every method returns false
    /// where the parser would throw or would change the text.
    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0
        var depth = 0
        /// A byte of 0x80 or more was seen: the whole text is checked as UTF-8 at the end.
        var nonASCII = false
        /// Whether the outer object's last member named the watched key holds an object.
        var keyIsObject = false
        /// The keys of the objects being scanned, innermost last, to find a key named twice (which the
        /// parser refuses). An object with more keys than `maximumKeysChecked` goes the parser's way.
        var keys: [Range<Int>] = []
        static let maximumKeysChecked = 16

        mutating func document(key: UnsafeBufferPointer<UInt8>) -> Bool {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "{"),
                  container(close: UInt8(ascii: "}"), members: true, watching: key), keyIsObject else { return false }
            skipWhitespace()
            guard index == bytes.count else { return false }
            if nonASCII, String(validating: bytes, as: UTF8.self) == nil { return false }
            return true
        }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func value() -> Bool {
            guard index < bytes.count else { return false }
            switch bytes[index] {
            case UInt8(ascii: "{"): return container(close: UInt8(ascii: "}"), members: true)
            case UInt8(ascii: "["): return container(close: UInt8(ascii: "]"), members: false)
            case UInt8(ascii: "\""): return string() != nil
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
            default: return false
            }
        }

        mutating func literal(_ text: StaticString) -> Bool {
            let utf8 = UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
            for byte in utf8 {
                guard index < bytes.count, bytes[index] == byte else { return false }
                index += 1
            }
            return true
        }

        /// An object (`members`: "key": value pairs) or an array, nested no deeper than the parser allows.
        /// `watching`: for the outer object, `keyIsObject` tells whether the last member named so
        /// holds an object (the one the parser keeps when a key is repeated).
        mutating func container(close: UInt8, members: Bool, watching key: UnsafeBufferPointer<UInt8>? = nil) -> Bool {
            depth += 1
            if depth > JSONParser.maximumDepth { return false }
            let firstKey = keys.count
            defer { keys.removeSubrange(firstKey...) }
            index += 1
            skipWhitespace()
            if index < bytes.count, bytes[index] == close { index += 1; depth -= 1; return true }
            while true {
                skipWhitespace()
                if members {
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return false }
                    let start = index + 1
                    guard let escaped = string() else { return false }
                    // A key with an escape might spell the watched key, or another key of this
                    // object: let the parser decide.
                    if escaped { return false }
                    let name = start..<(index - 1)
                    guard keys.count - firstKey < Self.maximumKeysChecked,
                          !keys[firstKey...].contains(where: { sameBytes($0, name) }) else { return false }
                    keys.append(name)
                    let isKey = key.map { UnsafeBufferPointer(rebasing: bytes[start..<(index - 1)]).elementsEqual($0) } ?? false
                    skipWhitespace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
                    index += 1
                    skipWhitespace()
                    if isKey { keyIsObject = index < bytes.count && bytes[index] == UInt8(ascii: "{") }
                }
                guard value() else { return false }
                skipWhitespace()
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == close { index += 1; break }
                return false
            }
            depth -= 1
            return true
        }

        func sameBytes(_ a: Range<Int>, _ b: Range<Int>) -> Bool {
            a.count == b.count && UnsafeBufferPointer(rebasing: bytes[a]).elementsEqual(UnsafeBufferPointer(rebasing: bytes[b]))
        }

        /// A string from its opening quote: nil where the parser throws or would change it; else
        /// whether it held an escape.
        mutating func string() -> Bool? {
            index += 1  // "
            var escaped = false
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") { index += 1; return escaped }
                if byte < 0x20 { return nil }        // the parser takes it; JSON that embeds it would not be JSON
                if byte >= 0x80 { nonASCII = true }
                index += 1
                guard byte == UInt8(ascii: "\\") else { continue }
                escaped = true
                guard index < bytes.count else { return nil }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    continue
                case UInt8(ascii: "u"):
                    guard let unit = hex4() else { return nil }
                    if (0xDC00...0xDFFF).contains(unit) { return nil }   // a lone low surrogate
                    if (0xD800...0xDBFF).contains(unit) {
                        // Only a high surrogate followed by a low one stays as it is.
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                              bytes[index + 1] == UInt8(ascii: "u") else { return nil }
                        index += 2
                        guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                    }
                default:
                    return nil
                }
            }
            return nil
        }

        mutating func hex4() -> UInt32? {
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard index < bytes.count, let digit = JSONParser.hexDigit(bytes[index]) else { return nil }
                value = value << 4 | digit
                index += 1
            }
            return value
        }

        mutating func number() -> Bool {
            let start = index
            let scan = JSONParser.scanNumber(bytes, from: start)
            index = scan.end
            guard scan.valid else { return false }
            // Up to 18 characters without fraction or exponent is an Int64; anything else is in range
            // exactly when the parser's own conversion to Double is finite.
            if scan.integral && index - start <= 18 { return true }
            let literal = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            return Double(literal)?.isFinite == true
        }
    }
}
