#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Searching raw bytes without creating strings.
public enum ByteScan {
    @inline(__always)
    public static func index(of byte: UInt8, in b: UnsafeRawBufferPointer, from: Int) -> Int? {
        guard from < b.count, let base = b.baseAddress else { return nil }
        guard let p = memchr(base + from, Int32(byte), b.count - from) else { return nil }
        return base.distance(to: UnsafeRawPointer(p))
    }

    public static func find(_ needle: StaticString, in b: UnsafeRawBufferPointer, from: Int) -> Int? {
        find(UnsafeRawBufferPointer(start: needle.utf8Start, count: needle.utf8CodeUnitCount), in: b, from: from)
    }

    public static func find(_ needle: UnsafeRawBufferPointer, in b: UnsafeRawBufferPointer, from: Int) -> Int? {
        // memchr for the first byte, memcmp for the rest (glibc's memmem is not visible to Swift).
        guard from <= b.count, let base = b.baseAddress, let nb = needle.baseAddress, needle.count > 0 else { return nil }
        let first = Int32(needle[0])
        let last = b.count - needle.count
        var i = from
        while i <= last {
            guard let p = memchr(base + i, first, last - i + 1) else { return nil }
            let at = base.distance(to: UnsafeRawPointer(p))
            if memcmp(base + at, nb, needle.count) == 0 { return at }
            i = at + 1
        }
        return nil
    }

    public static func hasPrefix(_ prefix: StaticString, _ b: UnsafeRawBufferPointer, at: Int) -> Bool {
        let count = prefix.utf8CodeUnitCount
        guard at >= 0, at + count <= b.count, let base = b.baseAddress else { return false }
        return memcmp(base + at, prefix.utf8Start, count) == 0
    }

    /// The element's local name (after any prefix), e.g. `features` for `<stream:features>`.
    public static func localName(_ stanza: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        guard stanza.count > 1, stanza[0] == UInt8(ascii: "<") else { return UnsafeRawBufferPointer(rebasing: stanza[0..<0]) }
        var start = 1
        var i = 1
        while i < stanza.count {
            let c = stanza[i]
            if c == UInt8(ascii: " ") || c == UInt8(ascii: ">") || c == UInt8(ascii: "/") || c == UInt8(ascii: "\t")
                || c == UInt8(ascii: "\n") || c == UInt8(ascii: "\r") { break }
            if c == UInt8(ascii: ":") { start = i + 1 }
            i += 1
        }
        return UnsafeRawBufferPointer(rebasing: stanza[start..<i])
    }

    public static func nameIs(_ stanza: UnsafeRawBufferPointer, _ name: StaticString) -> Bool {
        let local = localName(stanza)
        guard local.count == name.utf8CodeUnitCount, let base = local.baseAddress else { return false }
        return memcmp(base, name.utf8Start, local.count) == 0
    }

    /// The `>` that ends a start tag at or after `from`, skipping quoted attribute values.
    static func tagEnd(_ b: UnsafeRawBufferPointer, from: Int) -> Int? {
        var quote: UInt8 = 0
        for i in from..<max(from, b.count) {
            let c = b[i]
            if quote != 0 {
                if c == quote { quote = 0 }
            } else if c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") {
                quote = c
            } else if c == UInt8(ascii: ">") {
                return i
            }
        }
        return nil
    }

    /// `type="error"` on the element's start tag: a bounced stanza.
    static func isErrorType(_ stanza: UnsafeRawBufferPointer) -> Bool {
        guard let type = attribute("type=", in: stanza) else { return false }
        return equals(stanza, type, "error")
    }

    /// The end of the element's start tag (index of its `>`).
    public static func startTagEnd(_ stanza: UnsafeRawBufferPointer) -> Int {
        tagEnd(stanza, from: 0) ?? stanza.count
    }

    /// The raw (still escaped) value of an attribute of the element's start tag; `name` is given with
    /// its `=`, e.g. `"id="`.
    public static func attribute(_ name: StaticString, in stanza: UnsafeRawBufferPointer) -> Range<Int>? {
        let tag = UnsafeRawBufferPointer(rebasing: stanza[0..<startTagEnd(stanza)])
        var from = 0
        while let at = find(name, in: tag, from: from) {
            from = at + 1
            // Must start a name: preceded by whitespace.
            guard at > 0 else { continue }
            let before = tag[at - 1]
            guard before == UInt8(ascii: " ") || before == UInt8(ascii: "\t") || before == UInt8(ascii: "\n")
                || before == UInt8(ascii: "\r") else { continue }
            let q = at + name.utf8CodeUnitCount
            guard q < tag.count else { return nil }
            let quote = tag[q]
            guard quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") else { continue }
            guard let end = index(of: quote, in: tag, from: q + 1) else { return nil }
            return (q + 1)..<end
        }
        return nil
    }

    /// The value of the first `"key":"value"` string member after `from` (`key` given with its quotes,
    /// colon and opening quote, e.g. `"\"message_id\":\""`). JSON escapes are not decoded: the
    /// generator's own identifiers never need them.
    public static func jsonString(_ key: StaticString, in b: UnsafeRawBufferPointer, from: Int = 0) -> Range<Int>? {
        guard let at = find(key, in: b, from: from) else { return nil }
        let start = at + key.utf8CodeUnitCount
        guard let end = index(of: UInt8(ascii: "\""), in: b, from: start) else { return nil }
        return start..<end
    }

    /// A decimal number (digits only); nil when the range holds anything else or overflows.
    public static func decimal(_ b: UnsafeRawBufferPointer, _ range: Range<Int>) -> UInt64? {
        guard !range.isEmpty else { return nil }
        var v: UInt64 = 0
        for i in range {
            let c = b[i]
            guard c >= 48 && c <= 57 else { return nil }
            let (m, o1) = v.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(UInt64(c - 48))
            if o1 || o2 { return nil }
            v = s
        }
        return v
    }

    /// The number after the last `.` of a generator message id such as `b3.17`.
    public static func sequenceNumber(_ b: UnsafeRawBufferPointer, _ range: Range<Int>) -> UInt64? {
        var dot = range.upperBound
        while dot > range.lowerBound && b[dot - 1] != UInt8(ascii: ".") { dot -= 1 }
        return decimal(b, dot..<range.upperBound)
    }

    public static func equals(_ b: UnsafeRawBufferPointer, _ range: Range<Int>, _ literal: StaticString) -> Bool {
        guard range.count == literal.utf8CodeUnitCount, let base = b.baseAddress else { return false }
        return memcmp(base + range.lowerBound, literal.utf8Start, range.count) == 0
    }
}
