import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Monotonic nanoseconds. Every timestamp the generator puts into a payload comes from here, so
/// send→device latency is valid only when sender and receiver run in the same process (they do).
public enum MonotonicClock {
    @inline(__always)
    public static func nanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }
}

/// Splits an XMPP byte stream into its stream header, its top-level stanzas and its end tag, without
/// building a tree and without allocating once the buffer has grown to the largest stanza.
///
/// This is not a validating parser: the servers under test are trusted. It tracks element depth,
/// skips `<?…?>`, comments and CDATA, and honours quotes inside tags (an attribute value may hold `>`).
/// Ranges it returns index the bytes ``withBytes(_:_:)`` exposes and stay valid until the next
/// ``append(_:)``.
public struct StanzaFramer {
    public enum Event: Equatable {
        /// The stream's start tag (`<stream:stream …>`).
        case streamOpen(Range<Int>)
        /// One complete top-level element, from its `<` to the end of its end tag.
        case stanza(Range<Int>)
        /// `</stream:stream>`.
        case streamClose
    }

    public struct Malformed: Error, CustomStringConvertible {
        public var description: String { "malformed XML stream" }
    }

    private var buffer: ByteBuffer
    /// Where scanning continues, relative to the buffer's reader index.
    private var position = 0
    /// 0 before the stream header, 1 between stanzas, more inside one.
    private var depth = 0
    private var stanzaStart = 0

    public init(capacity: Int = 16 * 1024) {
        buffer = ByteBufferAllocator().buffer(capacity: capacity)
    }

    /// Forgets the stream state (not the unscanned bytes): the next start tag is a new stream header.
    /// For stream restarts after SASL success and STARTTLS.
    public mutating func restart() {
        depth = 0
    }

    public var bufferedBytes: Int { buffer.readableBytes }

    public mutating func append(_ bytes: inout ByteBuffer) {
        compact()
        buffer.writeBuffer(&bytes)
    }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        compact()
        buffer.writeBytes(bytes)
    }

    /// Drops what has been handed out already; moves the rest to the front only when that is cheap
    /// relative to the space it frees.
    private mutating func compact() {
        let keep = depth > 1 ? stanzaStart : position
        if keep > 0 {
            buffer.moveReaderIndex(forwardBy: keep)
            position -= keep
            if depth > 1 { stanzaStart = 0 }
        }
        if buffer.readerIndex > 0 && (buffer.readableBytes == 0 || buffer.readerIndex >= buffer.capacity / 2) {
            buffer.discardReadBytes()
        }
    }

    public func withBytes<R>(_ range: Range<Int>, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try buffer.withUnsafeReadableBytes { all in
            try body(UnsafeRawBufferPointer(rebasing: all[range]))
        }
    }

    /// The next complete event, or nil when more bytes are needed.
    public mutating func next() throws -> Event? {
        let (event, newPosition, newDepth, newStart) = try buffer.withUnsafeReadableBytes { b in
            try Self.scan(b, position: position, depth: depth, stanzaStart: stanzaStart)
        }
        position = newPosition
        depth = newDepth
        stanzaStart = newStart
        return event
    }

    private static func scan(_ b: UnsafeRawBufferPointer, position start: Int, depth startDepth: Int,
                             stanzaStart startOfStanza: Int) throws -> (Event?, Int, Int, Int) {
        var pos = start
        var depth = startDepth
        var stanzaStart = startOfStanza
        let n = b.count
        while true {
            guard let lt = ByteScan.index(of: UInt8(ascii: "<"), in: b, from: pos) else {
                return (nil, n, depth, stanzaStart)
            }
            guard lt + 1 < n else { return (nil, lt, depth, stanzaStart) }
            let c = b[lt + 1]
            if c == UInt8(ascii: "?") {
                guard let end = ByteScan.find("?>", in: b, from: lt + 2) else { return (nil, lt, depth, stanzaStart) }
                pos = end + 2
                continue
            }
            if c == UInt8(ascii: "!") {
                let terminator: StaticString
                if ByteScan.hasPrefix("<!--", b, at: lt) { terminator = "-->" }
                else if ByteScan.hasPrefix("<![CDATA[", b, at: lt) { terminator = "]]>" }
                else if n - lt < 9 { return (nil, lt, depth, stanzaStart) } // too short to tell yet
                else { terminator = ">" }
                guard let end = ByteScan.find(terminator, in: b, from: lt + 2) else {
                    return (nil, lt, depth, stanzaStart)
                }
                pos = end + terminator.utf8CodeUnitCount
                continue
            }
            if c == UInt8(ascii: "/") {
                guard let gt = ByteScan.index(of: UInt8(ascii: ">"), in: b, from: lt + 2) else {
                    return (nil, lt, depth, stanzaStart)
                }
                depth -= 1
                pos = gt + 1
                if depth < 0 { throw Malformed() }
                if depth == 0 { return (.streamClose, pos, depth, stanzaStart) }
                if depth == 1 { return (.stanza(stanzaStart..<pos), pos, depth, stanzaStart) }
                continue
            }
            guard let gt = ByteScan.tagEnd(b, from: lt + 1) else { return (nil, lt, depth, stanzaStart) }
            pos = gt + 1
            let selfClosing = b[gt - 1] == UInt8(ascii: "/")
            if depth == 0 {
                if selfClosing { return (.streamClose, pos, 0, stanzaStart) }
                return (.streamOpen(lt..<pos), pos, 1, stanzaStart)
            }
            if depth == 1 {
                stanzaStart = lt
                if selfClosing { return (.stanza(lt..<pos), pos, depth, stanzaStart) }
            }
            if !selfClosing { depth += 1 }
        }
    }
}

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

extension ByteBuffer {
    /// Decimal digits without going through `String`.
    @inline(__always)
    @discardableResult
    public mutating func writeDecimal(_ value: UInt64) -> Int {
        var digits = 1
        var v = value
        while v >= 10 { v /= 10; digits += 1 }
        let written = writeWithUnsafeMutableBytes(minimumWritableBytes: digits) { out in
            var v = value
            var i = digits - 1
            while true {
                out[i] = UInt8(48 + v % 10)
                v /= 10
                if i == 0 { break }
                i -= 1
            }
            return digits
        }
        return written
    }

    @inline(__always)
    @discardableResult
    public mutating func writeDecimal(_ value: Int) -> Int {
        writeDecimal(UInt64(value))
    }
}

/// Outgoing stanzas, written straight into a ByteBuffer.
public enum StanzaWriter {
    public static let streamNS = "http://etherx.jabber.org/streams"

    public static func streamHeader(to domain: String) -> String {
        "<stream:stream to=\"\(domain)\" version=\"1.0\" xmlns=\"jabber:client\" xmlns:stream=\"\(streamNS)\">"
    }

    /// SASL PLAIN (RFC 4616): `\0user\0password`, base64.
    public static func saslPlain(user: String, password: String) -> String {
        let payload = Array("\0\(user)\0\(password)".utf8)
        return "<auth xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\" mechanism=\"PLAIN\">\(base64(payload))</auth>"
    }

    public static func bind(resource: String?) -> String {
        if let resource {
            return "<iq type=\"set\" id=\"bind-1\"><bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\"><resource>\(resource)</resource></bind></iq>"
        }
        return "<iq type=\"set\" id=\"bind-1\"><bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\"/></iq>"
    }

    public static let session = "<iq type=\"set\" id=\"sess-1\"><session xmlns=\"urn:ietf:params:xml:ns:xmpp-session\"/></iq>"
    public static let startTLS = "<starttls xmlns=\"urn:ietf:params:xml:ns:xmpp-tls\"/>"

    public static func base64(_ bytes: [UInt8]) -> String {
        let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        var i = 0
        while i + 2 < bytes.count {
            let n = (UInt32(bytes[i]) << 16) | (UInt32(bytes[i + 1]) << 8) | UInt32(bytes[i + 2])
            out += [table[Int(n >> 18)], table[Int((n >> 12) & 63)], table[Int((n >> 6) & 63)], table[Int(n & 63)]]
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [table[Int(n >> 18)], table[Int((n >> 12) & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        } else if rest == 2 {
            let n = (UInt32(bytes[i]) << 16) | (UInt32(bytes[i + 1]) << 8)
            out += [table[Int(n >> 18)], table[Int((n >> 12) & 63)], table[Int((n >> 6) & 63)], UInt8(ascii: "=")]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
