import NIOCore

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
