import PushDomain

/// Journal events as bytes, appended where they happen and written by the journal's writer.
///
/// Why bytes and not `[JournalEvent]`: an event's strings (its message id and token) are shared
/// with the engine's own copies, so keeping the events kept those buffers alive until the writer
/// thread dropped them. Freeing memory that another thread allocated takes that thread's malloc
/// arena lock, and at tens of thousands of events a second that contention showed in the event
/// loop's profile (docs/admin-api.md#message-journal has the journal's cost). Copied into a buffer that
/// the journal reuses, the strings are released where they were made, and the writer binds the
/// bytes straight from the buffer.
struct EncodedEvents {
    private(set) var bytes: [UInt8] = []
    private(set) var count = 0

    init(capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    /// Empties it and keeps its memory (the writer hands it back for reuse).
    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        count = 0
    }

    private static let kinds = JournalEventKind.allCases
    private static let apis = SendAPI.allCases
    private static let absent = UInt32.max

    mutating func append(_ e: JournalEvent) {
        Self.appendHeader(seq: e.seq, at: e.at, kind: e.kind, api: e.api, to: &bytes)
        // Field by field, not through an array of them: that array was an allocation per event.
        appendText(e.messageID)
        appendText(e.sender)
        appendText(e.token)
        appendText(e.topic)
        appendText(e.connection)
        appendText(e.clientMessageID)
        appendText(e.detail)
        count += 1
    }

    private mutating func appendText(_ text: String?) {
        guard var text else {
            Self.appendLength(Self.absent, to: &bytes)
            return
        }
        text.withUTF8 { utf8 in Self.appendText(utf8, to: &bytes) }
    }

    /// The event's bytes without its message id and token, into `out`: an entry's blob, whose row
    /// holds those two once (`View.event(messageID:token:)` puts them back).
    static func appendStripped(_ e: View, to out: inout [UInt8]) {
        appendHeader(seq: e.seq, at: e.at, kind: e.kind, api: e.api, to: &out)
        for i in 0..<7 {
            guard i != 0, i != 2, let text = View.text(at: i, of: e.texts) else {
                appendLength(absent, to: &out)
                continue
            }
            appendText(text, to: &out)
        }
    }

    // The format: seq and time (8 bytes each, little-endian), the kind's and the API's numbers (a
    // byte each; API 0 is none), then seven texts, each a 4-byte length (all ones: none) and its bytes.

    private static func appendHeader(seq: Int64, at: Int64, kind: JournalEventKind, api: SendAPI?, to out: inout [UInt8]) {
        withUnsafeBytes(of: seq.littleEndian) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: at.littleEndian) { out.append(contentsOf: $0) }
        out.append(UInt8(kinds.firstIndex(of: kind)!))
        out.append(api.map { UInt8(apis.firstIndex(of: $0)! + 1) } ?? 0)
    }

    private static func appendText(_ text: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        appendLength(UInt32(text.count), to: &out)
        out.append(contentsOf: text)
    }

    private static func appendLength(_ v: UInt32, to out: inout [UInt8]) {
        withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) }
    }

    /// One event as the writer reads it: numbers, and each text as bytes inside the buffer (valid
    /// only during `parse`'s call).
    struct View {
        var seq: Int64
        var at: Int64
        var kind: JournalEventKind
        var api: SendAPI?
        /// messageID, sender, token, topic, connection, clientMessageID, detail: stored fields, not an
        /// array, so that reading an event allocates nothing.
        var texts: (UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?,
                    UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?,
                    UnsafeBufferPointer<UInt8>?)

        func text(_ i: Int) -> String? { Self.text(at: i, of: texts).map { String(decoding: $0, as: UTF8.self) } }

        static func text(at i: Int, of t: (UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?,
                                          UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?,
                                          UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?,
                                          UnsafeBufferPointer<UInt8>?)) -> UnsafeBufferPointer<UInt8>? {
            switch i {
            case 0: return t.0
            case 1: return t.1
            case 2: return t.2
            case 3: return t.3
            case 4: return t.4
            case 5: return t.5
            default: return t.6
            }
        }

        var event: JournalEvent {
            var e = JournalEvent(at: at, kind: kind, messageID: text(0) ?? "", sender: text(1), token: text(2),
                                 topic: text(3), api: api, connection: text(4), clientMessageID: text(5), detail: text(6))
            e.seq = seq
            return e
        }
    }

    /// Reads events from bytes in this format (a batch, or an entry's blob read back).
    static func parse(_ buffer: UnsafeBufferPointer<UInt8>, _ body: (View) throws -> Void) rethrows {
        do {
            var at = 0
            func int() -> Int64 {
                var v: Int64 = 0
                withUnsafeMutableBytes(of: &v) { $0.copyMemory(from: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: buffer[at..<at + 8]))) }
                at += 8
                return Int64(littleEndian: v)
            }
            func length() -> UInt32 {
                var v: UInt32 = 0
                withUnsafeMutableBytes(of: &v) { $0.copyMemory(from: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: buffer[at..<at + 4]))) }
                at += 4
                return UInt32(littleEndian: v)
            }
            func text() -> UnsafeBufferPointer<UInt8>? {
                let n = length()
                if n == Self.absent { return nil }
                defer { at += Int(n) }
                return UnsafeBufferPointer(rebasing: buffer[at..<at + Int(n)])
            }
            while at < buffer.count {
                let seq = int(), time = int()
                let kind = Self.kinds[Int(buffer[at])]
                let api = buffer[at + 1] == 0 ? nil : Self.apis[Int(buffer[at + 1]) - 1]
                at += 2
                let texts = (text(), text(), text(), text(), text(), text(), text())
                try body(View(seq: seq, at: time, kind: kind, api: api, texts: texts))
            }
        }
    }

    /// The events of an entry's blob, with the message id and token its row holds.
    static func events(in bytes: [UInt8], messageID: String, token: String?) -> [JournalEvent] {
        var all: [JournalEvent] = []
        bytes.withUnsafeBufferPointer {
            parse($0) { view in
                var e = view.event
                e.messageID = messageID
                e.token = token
                all.append(e)
            }
        }
        return all
    }
}
