import PushDomain

/// Journal events as bytes, appended where they happen and written by the journal's writer.
///
/// Why bytes and not `[JournalEvent]`: an event's strings (its message id and token) are shared
/// with the engine's own copies, so keeping the events kept those buffers alive until the writer
/// thread dropped them. Freeing memory that another thread allocated takes that thread's malloc
/// arena lock, and at tens of thousands of events a second that contention cost the event loop a
/// quarter of its throughput (measured: docs/benchmarks.md, "Journal"). Copied into a buffer that
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
        appendInt(e.seq)
        appendInt(e.at)
        bytes.append(UInt8(Self.kinds.firstIndex(of: e.kind)!))
        bytes.append(e.api.map { UInt8(Self.apis.firstIndex(of: $0)! + 1) } ?? 0)
        for text in [e.messageID, e.sender, e.token, e.topic, e.connection, e.clientMessageID, e.detail] as [String?] {
            guard var text else {
                appendLength(Self.absent)
                continue
            }
            text.withUTF8 { utf8 in
                appendLength(UInt32(utf8.count))
                bytes.append(contentsOf: utf8)
            }
        }
        count += 1
    }

    private mutating func appendInt(_ v: Int64) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    private mutating func appendLength(_ v: UInt32) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// One event as the writer reads it: numbers, and each text as bytes inside the buffer (valid
    /// only during `forEach`'s call).
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

    func forEach(_ body: (View) throws -> Void) rethrows {
        try bytes.withUnsafeBufferPointer { buffer in
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

    /// The events themselves (tests, and the first/last seq).
    var events: [JournalEvent] {
        var all: [JournalEvent] = []
        forEach { all.append($0.event) }
        return all
    }
}
