/// A JSON value as CCS sees it.
///
/// Numbers keep their integer-ness: a literal written without fraction or exponent that fits
/// in 64 bits is `.int`, everything else is `.double`. That matters because CCS turns
/// non-string `data` values into their JSON text, and `600` must stay `"600"`, not `"600.0"`.
public enum JSONValue: Sendable, Equatable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// A number from a `Double`: integral values that fit in 64 bits become `.int`.
    public static func number(_ value: Double) -> JSONValue {
        if let exact = Int64(exactly: value) { return .int(exact) }
        return .double(value)
    }

    /// Parses one JSON text (RFC 8259). Leading and trailing whitespace is skipped; anything
    /// else after the value is an error.
    /// Refuses an object that names a key twice (`JSONParseError.duplicateKey`), as Google's APIs
    /// do; `duplicateKeys: .lastWins` is only for finding a refused message's id to NACK.
    public static func parse(_ text: String, duplicateKeys: DuplicateKeys = .refused) throws(JSONParseError) -> JSONValue {
        var text = text
        let result = text.withUTF8 { bytes -> Result<JSONValue, JSONParseError> in
            var parser = JSONParser(bytes, duplicateKeys: duplicateKeys)
            do throws(JSONParseError) { return .success(try parser.parseDocument()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Parses JSON text given as bytes: text that is not valid UTF-8 is an error (RFC 8259 §8.1),
    /// never a string with U+FFFD in place of the bad bytes.
    public static func parse(utf8 bytes: UnsafeRawBufferPointer) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes.assumingMemoryBound(to: UInt8.self))
        return try parser.parseDocument()
    }

    public enum DuplicateKeys: Sendable {
        case refused
        case lastWins
    }

    /// Compact, deterministic JSON text: object keys sorted by their UTF-8 bytes, no spaces,
    /// strings escaped per RFC 8259 (`/` and non-ASCII are left as they are).
    public func encoded() -> String {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        JSONEncoding.append(self, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}

// MARK: - Accessors

extension JSONValue {
    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let object) = self { return object }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let array) = self { return array }
        return nil
    }

    public var stringValue: String? {
        if case .string(let string) = self { return string }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let bool) = self { return bool }
        return nil
    }

    /// The integer value of `.int`, or of a `.double` that is integral and in range.
    public var intValue: Int64? {
        switch self {
        case .int(let int): return int
        case .double(let double): return Int64(exactly: double)
        default: return nil
        }
    }

    /// Any number as a `Double`.
    public var numberValue: Double? {
        switch self {
        case .int(let int): return Double(int)
        case .double(let double): return double
        default: return nil
        }
    }

    public var isNull: Bool { self == .null }

    /// What kind of value this is, for error texts ("a string", "an object", …).
    public var kindDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int, .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

extension JSONValue: CustomStringConvertible {
    public var description: String { encoded() }
}

// MARK: - Literals (handy for tests and for building payloads)

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var object: [String: JSONValue] = [:]
        for (key, value) in elements { object[key] = value }
        self = .object(object)
    }
}

// MARK: - Errors

public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, e.g. "Unexpected character (x)".
    public var reason: String
    /// Byte offset into the UTF-8 text.
    public var position: Int
    /// Set when the text is JSON but names a key twice in one object: the key, and how deep its object
    /// is (1: the outer object; arrays count as a level). Every listener refuses such text (docs/bad-input.md): a reader that
    /// takes the first value and one that takes the last would see two different messages.
    public var duplicateKey: DuplicateKey?

    public struct DuplicateKey: Sendable, Equatable {
        public var name: String
        public var depth: Int

        public init(name: String, depth: Int) {
            self.name = name
            self.depth = depth
        }
    }

    public init(reason: String, position: Int, duplicateKey: DuplicateKey? = nil) {
        self.reason = reason
        self.position = position
        self.duplicateKey = duplicateKey
    }

    public var description: String { "\(reason) at position \(position)" }
}

// MARK: - Parser

/// A byte-level recursive-descent parser. Recursion is bounded by `maximumDepth`, so hostile
/// input ("[[[[…") cannot blow the stack.
struct JSONParser {
    static let maximumDepth = 128

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var depth = 0
    private let duplicateKeys: JSONValue.DuplicateKeys
    /// A byte of 0x80 or more was seen in a string: the text is checked as UTF-8 at the end.
    private var nonASCII = false

    init(_ bytes: UnsafeBufferPointer<UInt8>, duplicateKeys: JSONValue.DuplicateKeys = .refused) {
        self.bytes = bytes
        self.duplicateKeys = duplicateKeys
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        if index < bytes.count { throw unexpected() }
        // Strings are decoded leniently on the way (U+FFFD for bad bytes); the bytes decide here.
        // A `String` argument is valid UTF-8 already, so this matters for `parse(utf8:)`.
        if nonASCII, String(validating: bytes, as: UTF8.self) == nil {
            throw JSONParseError(reason: "Invalid UTF-8 (RFC 8259 §8.1)", position: 0)
        }
        return value
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private func unexpected() -> JSONParseError {
        guard index < bytes.count else {
            return JSONParseError(reason: "Unexpected end of input", position: index)
        }
        // Show the whole character, not a lone UTF-8 byte.
        var end = index + 1
        while end < bytes.count, bytes[end] & 0xC0 == 0x80 { end += 1 }
        let character = String(decoding: UnsafeBufferPointer(rebasing: bytes[index..<end]), as: UTF8.self)
        return JSONParseError(reason: "Unexpected character (\(character))", position: index)
    }

    private mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw unexpected() }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw unexpected()
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let utf8 = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        for byte in utf8 {
            guard index < bytes.count, bytes[index] == byte else { throw unexpected() }
            index += 1
        }
    }

    private mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > Self.maximumDepth {
            throw JSONParseError(reason: "Nesting deeper than \(Self.maximumDepth) levels", position: index)
        }
    }

    private mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1  // {
        // Sized for a typical stanza's object at once, instead of growing 1 → 2 → 4 → 8.
        var object = [String: JSONValue](minimumCapacity: 8)
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(object)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw unexpected() }
            let keyPosition = index
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw unexpected() }
            index += 1
            skipWhitespace()
            let value = try parseValue()
            guard object.updateValue(value, forKey: key) == nil || duplicateKeys == .lastWins else {
                throw JSONParseError(reason: "Duplicate field \(JSONValue.string(key).encoded())", position: keyPosition,
                                     duplicateKey: .init(name: key, depth: depth))
            }
            skipWhitespace()
            guard index < bytes.count else { throw unexpected() }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; break }
            throw unexpected()
        }
        depth -= 1
        return .object(object)
    }

    private mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1  // [
        var array: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(array)
        }
        while true {
            skipWhitespace()
            array.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw unexpected() }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; break }
            throw unexpected()
        }
        depth -= 1
        return .array(array)
    }

    /// Raw control characters inside strings are accepted (RFC 8259 forbids them, but the
    /// Java lexers CCS was built on let them through, and rejecting them helps nobody).
    private mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let string = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                index += 1
                return string
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte >= 0x80 { nonASCII = true }
            index += 1
        }
        guard index < bytes.count else { throw unexpected() }
        var buffer = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                return String(decoding: buffer, as: UTF8.self)
            }
            if byte != UInt8(ascii: "\\") {
                if byte >= 0x80 { nonASCII = true }
                buffer.append(byte)
                index += 1
                continue
            }
            index += 1
            guard index < bytes.count else { throw unexpected() }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""): buffer.append(0x22)
            case UInt8(ascii: "\\"): buffer.append(0x5C)
            case UInt8(ascii: "/"): buffer.append(0x2F)
            case UInt8(ascii: "b"): buffer.append(0x08)
            case UInt8(ascii: "f"): buffer.append(0x0C)
            case UInt8(ascii: "n"): buffer.append(0x0A)
            case UInt8(ascii: "r"): buffer.append(0x0D)
            case UInt8(ascii: "t"): buffer.append(0x09)
            case UInt8(ascii: "u"):
                let scalar = try parseUnicodeEscape()
                appendUTF8(scalar, to: &buffer)
            default:
                index -= 1
                throw JSONParseError(reason: "Invalid escape sequence (\\\(Character(UnicodeScalar(escape))))", position: index - 1)
            }
        }
        throw unexpected()
    }

    /// A hex digit's value (for `\\uXXXX`; `JSONText` reads them the same way).
    static func hexDigit(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard index < bytes.count else { throw unexpected() }
            guard let digit = Self.hexDigit(bytes[index]) else {
                throw JSONParseError(reason: "Invalid \\u escape", position: index)
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    /// `\uXXXX`, combining surrogate pairs. A lone surrogate (which Java strings can hold but
    /// Swift strings cannot) becomes U+FFFD rather than failing the whole message.
    private mutating func parseUnicodeEscape() throws(JSONParseError) -> Unicode.Scalar {
        let first = try parseHex4()
        if (0xD800...0xDBFF).contains(first) {
            if index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") {
                let save = index
                index += 2
                let second = try parseHex4()
                if (0xDC00...0xDFFF).contains(second) {
                    let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                    return Unicode.Scalar(combined) ?? "\u{FFFD}"
                }
                index = save  // not a pair: let the next escape stand on its own
            }
            return "\u{FFFD}"
        }
        return Unicode.Scalar(first) ?? "\u{FFFD}"
    }

    private func appendUTF8(_ scalar: Unicode.Scalar, to buffer: inout [UInt8]) {
        for unit in UTF8.encode(scalar)! { buffer.append(unit) }
    }

    private mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        let scan = Self.scanNumber(bytes, from: start)
        index = scan.end
        guard scan.valid else { throw unexpected() }
        let literal = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if scan.integral, let int = Int64(literal) { return .int(int) }
        guard let double = Double(literal), double.isFinite else {
            throw JSONParseError(reason: "Number out of range (\(literal))", position: start)
        }
        return .double(double)
    }

    /// A number literal from `start` (a `-` or a digit) by RFC 8259's grammar: where it ends, and
    /// whether it is integral (no fraction, no exponent); not `valid`: `end` is where it breaks.
    /// (`JSONText` checks numbers with it too.)
    static func scanNumber(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> (end: Int, integral: Bool, valid: Bool) {
        var index = start
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { return (index, true, false) }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if isDigit(bytes[index]) {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        } else {
            return (index, true, false)
        }
        var integral = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            integral = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { return (index, false, false) }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            integral = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { return (index, false, false) }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        return (index, integral, true)
    }

    @inline(__always)
    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }
}

// MARK: - Encoder

enum JSONEncoding {
    static func append(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let bool): out.append(contentsOf: (bool ? "true" : "false").utf8)
        case .int(let int): out.append(contentsOf: String(int).utf8)
        case .double(let double): out.append(contentsOf: numberText(double).utf8)
        case .string(let string): appendString(string, to: &out)
        case .array(let array):
            out.append(UInt8(ascii: "["))
            for (offset, element) in array.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                append(element, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            // Pairs sorted whole (not keys sorted, then each value looked up again: a hash per key), and
            // an object of one member needs no sort at all.
            if object.count == 1, let (key, member) = object.first {
                appendString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                append(member, to: &out)
            } else {
                var first = true
                for (key, member) in object.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
                    if !first { out.append(UInt8(ascii: ",")) }
                    first = false
                    appendString(key, to: &out)
                    out.append(UInt8(ascii: ":"))
                    append(member, to: &out)
                }
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Sorted by UTF-8 bytes, so the order is the same on every platform and locale.
    static func sortedKeys<V>(_ object: [String: V]) -> [String] {
        object.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// Integral doubles within ±2^53 print without ".0" (as JavaScript does), others use
    /// Swift's shortest round-trip form; non-finite numbers have no JSON form and become null.
    static func numberText(_ double: Double) -> String {
        guard double.isFinite else { return "null" }
        if double == double.rounded(), abs(double) <= 9_007_199_254_740_992 {
            return String(Int64(double))
        }
        return String(double)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    static func appendString(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Fast path: nothing to escape (keys, ids, tokens, most values) is one scan and one copy of the
        // string's own bytes (through a stored closure and the UTF-8 view it was a twentieth of the
        // APNs path's loop: a dozen keys and values per stored message).
        let copied = string.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
            for byte in utf8 where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return false }
            out.append(contentsOf: utf8)
            out.append(UInt8(ascii: "\""))
            return true
        }
        if copied == true { return }
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "\\"))
            case 0x08: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "f"))
            case 0x0A: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "t"))
            case 0x00..<0x20:
                out.append(contentsOf: "\\u00".utf8)
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    static func quoted(_ string: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(string.utf8.count + 2)
        appendString(string, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}

// MARK: - Ordered object writer

/// Writes a JSON object with keys in the order they are added, for outgoing messages whose
/// key order should match the CCS documentation's examples. Output is compact.
public struct JSONObjectWriter: Sendable {
    private var bytes: [UInt8] = [UInt8(ascii: "{")]
    private var isEmpty = true

    public init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    private mutating func key(_ key: String) {
        if !isEmpty { bytes.append(UInt8(ascii: ",")) }
        isEmpty = false
        JSONEncoding.appendString(key, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func add(_ key: String, _ value: String) {
        self.key(key)
        JSONEncoding.appendString(value, to: &bytes)
    }

    public mutating func add(_ key: String, _ value: Int) {
        self.key(key)
        bytes.append(contentsOf: String(value).utf8)
    }

    public mutating func add(_ key: String, _ value: Int64) {
        self.key(key)
        bytes.append(contentsOf: String(value).utf8)
    }

    public mutating func add(_ key: String, _ value: Bool) {
        self.key(key)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// Any JSON value, encoded compactly with sorted keys.
    public mutating func add(_ key: String, json value: JSONValue) {
        self.key(key)
        JSONEncoding.append(value, to: &bytes)
    }

    /// A string map as a JSON object with sorted keys.
    public mutating func add(_ key: String, stringMap: [String: String]) {
        self.key(key)
        bytes.append(UInt8(ascii: "{"))
        var first = true
        for mapKey in JSONEncoding.sortedKeys(stringMap) {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            JSONEncoding.appendString(mapKey, to: &bytes)
            bytes.append(UInt8(ascii: ":"))
            JSONEncoding.appendString(stringMap[mapKey]!, to: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// A value that is already JSON text (e.g. a nested `JSONObjectWriter`'s output).
    public mutating func add(_ key: String, rawJSON: String) {
        self.key(key)
        bytes.append(contentsOf: rawJSON.utf8)
    }

    /// The finished object's text, without copying the bytes first.
    public consuming func finished() -> String {
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
    }

}
