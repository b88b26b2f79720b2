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

    /// An event's kind and API as the two bytes both formats write (API 0: none).
    private static func kindAndAPIBytes(_ kind: JournalEventKind, _ api: SendAPI?) -> (UInt8, UInt8) {
        (UInt8(kinds.firstIndex(of: kind)!), api.map { UInt8(apis.firstIndex(of: $0)! + 1) } ?? 0)
    }

    /// The kind and API those two bytes name; nil for numbers this build does not have (a damaged file).
    private static func kindAndAPI(_ kind: UInt8, _ api: UInt8) -> (JournalEventKind, SendAPI?)? {
        guard Int(kind) < kinds.count, Int(api) <= apis.count else { return nil }
        return (kinds[Int(kind)], api == 0 ? nil : apis[Int(api) - 1])
    }

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

    /// The event's bytes as a row's blob holds them (`RowFormat`), into `out`.
    static func appendToRow(_ e: View, row: RowFormat, to out: inout [UInt8]) {
        RowFormat.appendVarint(RowFormat.zigzag(e.seq &- row.seq), to: &out)
        RowFormat.appendVarint(RowFormat.zigzag(e.at &- row.at), to: &out)
        let (kind, api) = kindAndAPIBytes(e.kind, e.api)
        out.append(kind)
        out.append(api)
        var flags: UInt8 = 0
        var sameSender = false
        if let sender = e.texts.1, let rowSender = row.sender { sameSender = JournalDatabase.equal(rowSender, sender) }
        if sameSender { flags |= RowFormat.sameSender }
        for (bit, i) in RowFormat.textIndices.enumerated() where View.text(at: i, of: e.texts) != nil && !(i == 1 && sameSender) {
            flags |= 1 << bit
        }
        out.append(flags)
        for (bit, i) in RowFormat.textIndices.enumerated() where flags & (1 << bit) != 0 {
            let text = View.text(at: i, of: e.texts)!
            RowFormat.appendVarint(UInt64(text.count), to: &out)
            out.append(contentsOf: text)
        }
    }

    /// What a row's blob leaves out of its events: the row holds the message id and the token once,
    /// and each event's seq, time and sender are kept against the row's first seq, first time and
    /// sender. Three events of a delivered message were 187 bytes in the batch's format and are about
    /// 15 here: the journal file of the same run went from 32 to 18 MB, the writer's time per message
    /// from 5.9 to 5.1 µs (docs/benchmarks.md, sixth round).
    ///
    /// An event: its seq and time as differences from the row's (zigzag LEB128 varints), the kind's and
    /// the API's numbers (a byte each), a byte of flags (bits 0–4: sender, topic, connection, client
    /// message id and detail present; bit 5: the sender is the row's, not repeated), then each present
    /// text as a varint length and its bytes.
    struct RowFormat {
        var seq: Int64
        var at: Int64
        var sender: UnsafeBufferPointer<UInt8>?

        /// The event texts a row's blob can hold (`View.texts` positions): all but message id and token.
        static let textIndices = [1, 3, 4, 5, 6]
        static let sameSender: UInt8 = 1 << 5

        static func zigzag(_ v: Int64) -> UInt64 { UInt64(bitPattern: (v << 1) ^ (v >> 63)) }
        static func unzigzag(_ v: UInt64) -> Int64 { Int64(bitPattern: v >> 1) ^ -Int64(bitPattern: v & 1) }

        static func appendVarint(_ value: UInt64, to out: inout [UInt8]) {
            var v = value
            while v >= 0x80 {
                out.append(UInt8(truncatingIfNeeded: v) | 0x80)
                v >>= 7
            }
            out.append(UInt8(v))
        }
    }

    /// The events of a row's blob (`RowFormat`), with what the row holds once put back. A blob that
    /// ends early or says more than it holds (a damaged file) gives the events read up to there.
    static func events(inRow bytes: [UInt8], messageID: String, token: String?, seq: Int64, at: Int64,
                       sender: String?) -> [JournalEvent] {
        var all: [JournalEvent] = []
        var i = 0
        func byte() -> UInt8? {
            guard i < bytes.count else { return nil }
            defer { i += 1 }
            return bytes[i]
        }
        func varint() -> UInt64? {
            var v: UInt64 = 0
            var shift: UInt64 = 0
            while shift < 64, let b = byte() {
                v |= UInt64(b & 0x7f) << shift
                if b < 0x80 { return v }
                shift += 7
            }
            return nil
        }
        while i < bytes.count {
            guard let dSeq = varint(), let dAt = varint(), let kindByte = byte(), let apiByte = byte(),
                  let (kind, api) = kindAndAPI(kindByte, apiByte), let flags = byte() else { break }
            var texts: [String?] = Array(repeating: nil, count: 7)
            var complete = true
            for (bit, index) in RowFormat.textIndices.enumerated() where flags & (1 << bit) != 0 {
                guard let n = varint(), n <= UInt64(bytes.count - i) else { complete = false; break }
                texts[index] = String(decoding: bytes[i..<i + Int(n)], as: UTF8.self)
                i += Int(n)
            }
            guard complete else { break }
            if flags & RowFormat.sameSender != 0 { texts[1] = sender }
            var e = JournalEvent(at: at &+ RowFormat.unzigzag(dAt), kind: kind, messageID: messageID,
                                 sender: texts[1], token: token, topic: texts[3], api: api, connection: texts[4],
                                 clientMessageID: texts[5], detail: texts[6])
            e.seq = seq &+ RowFormat.unzigzag(dSeq)
            all.append(e)
        }
        return all
    }

    // The batch's format: seq and time (8 bytes each, little-endian), the kind's and the API's numbers
    // (a byte each; API 0 is none), then seven texts, each a 4-byte length (all ones: none) and its
    // bytes. Rows keep their events in `RowFormat`.

    private static func appendHeader(seq: Int64, at: Int64, kind: JournalEventKind, api: SendAPI?, to out: inout [UInt8]) {
        withUnsafeBytes(of: seq.littleEndian) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: at.littleEndian) { out.append(contentsOf: $0) }
        let (k, a) = kindAndAPIBytes(kind, api)
        out.append(k)
        out.append(a)
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

    /// Reads events from bytes in this format (a batch, or a row's blob from before `RowFormat`, which
    /// the journal's migration reads). Bytes that end inside an event, or name a kind or API this
    /// build does not have (a damaged file), end the reading there.
    static func parse(_ buffer: UnsafeBufferPointer<UInt8>, _ body: (View) throws -> Void) rethrows {
        var at = 0
        func int() -> Int64? {
            guard buffer.count - at >= 8 else { return nil }
            var v: Int64 = 0
            withUnsafeMutableBytes(of: &v) { $0.copyMemory(from: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: buffer[at..<at + 8]))) }
            at += 8
            return Int64(littleEndian: v)
        }
        /// nil: the bytes end here; .some(nil): no text.
        func text() -> UnsafeBufferPointer<UInt8>?? {
            guard buffer.count - at >= 4 else { return nil }
            var v: UInt32 = 0
            withUnsafeMutableBytes(of: &v) { $0.copyMemory(from: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: buffer[at..<at + 4]))) }
            at += 4
            let n = UInt32(littleEndian: v)
            if n == Self.absent { return .some(nil) }
            guard buffer.count - at >= Int(n) else { return nil }
            defer { at += Int(n) }
            return .some(UnsafeBufferPointer(rebasing: buffer[at..<at + Int(n)]))
        }
        while at < buffer.count {
            guard let seq = int(), let time = int(), buffer.count - at >= 2,
                  let (kind, api) = Self.kindAndAPI(buffer[at], buffer[at + 1]) else { return }
            at += 2
            guard let t0 = text(), let t1 = text(), let t2 = text(), let t3 = text(), let t4 = text(), let t5 = text(),
                  let t6 = text() else { return }
            try body(View(seq: seq, at: time, kind: kind, api: api, texts: (t0, t1, t2, t3, t4, t5, t6)))
        }
    }
}
