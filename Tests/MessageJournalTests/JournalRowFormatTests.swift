import Foundation
import GRDB
@testable import MessageJournal
import PushDomain
import Testing

/// A row's events in `EncodedEvents.RowFormat`: every field comes back, and journals written in the
/// format before it are converted when they open.
@Suite struct JournalRowFormatTests {
    private func path() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ccs-journal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.appendingPathComponent("journal.sqlite").path
    }

    private func batch(_ events: [JournalEvent], firstSeq: Int64) -> EncodedEvents {
        var batch = EncodedEvents()
        for (i, var e) in events.enumerated() {
            e.seq = firstSeq + Int64(i)
            batch.append(e)
        }
        return batch
    }

    private func same(_ a: [JournalEvent], _ b: [JournalEvent]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { x, y in
            x.seq == y.seq && x.at == y.at && x.kind == y.kind && x.messageID == y.messageID && x.sender == y.sender
                && x.token == y.token && x.topic == y.topic && x.api == y.api && x.connection == y.connection
                && x.clientMessageID == y.clientMessageID && x.detail == y.detail
        }
    }

    /// One message's events for one device land in one row: a first event without a sender, then the
    /// row's sender, another sender, a clock moved back, every optional text, and numbers far apart.
    @Test func everyFieldComesBackFromARow() throws {
        let db = try JournalDatabase(path: try path())
        let id = "0:1795778961367541%dbab0a8b"
        let events = [
            JournalEvent(at: 1_795_778_961_367, kind: .faultApplied, messageID: id, sender: nil, token: "tok-ä",
                         detail: "drop"),
            JournalEvent(at: 1_795_778_961_368, kind: .accepted, messageID: id, sender: "440014454224", token: "tok-ä",
                         api: .v1, clientMessageID: "m-1"),
            JournalEvent(at: 1_795_778_961_100, kind: .handedOver, messageID: id, sender: "440014454224",
                         token: "tok-ä", connection: "c7"),
            JournalEvent(at: 0, kind: .receiptSent, messageID: id, sender: "999", token: "tok-ä", topic: "/topics/news",
                         api: .ccs, connection: "c8", clientMessageID: "m-1", detail: "é ✓ \u{0}"),
            JournalEvent(at: Int64.max / 2, kind: .deviceAcked, messageID: id, sender: "440014454224", token: "tok-ä"),
        ]
        try db.insert(batch(events, firstSeq: 1 << 40), recordedAt: 10)
        let back = try db.events(messageID: id)
        #expect(same(back, batch(events, firstSeq: 1 << 40).allEvents))
        // Three events of a delivered message take a few bytes each, not the batch's 40-odd.
        var row: [UInt8] = []
        let acked = JournalEvent(at: 1_795_778_961_369, kind: .deviceAcked, messageID: id, sender: "440014454224",
                                 token: "tok-ä")
        let delivered = batch([events[1], events[2], acked], firstSeq: 7)
        delivered.bytes.withUnsafeBufferPointer { buffer in
            var first: EncodedEvents.View?
            EncodedEvents.parse(buffer) { e in
                if first == nil { first = e }
                EncodedEvents.appendToRow(e, row: .init(seq: first!.seq, at: first!.at, sender: first!.texts.1), to: &row)
            }
        }
        #expect(row.count < 30)
    }

    /// A row's blob cut short or naming a kind this build lacks (a damaged file) gives the events read
    /// up to there, never a crash; a batch in the same state likewise.
    @Test func damagedBlobsEndTheReading() throws {
        let e = JournalEvent(at: 5, kind: .accepted, messageID: "m", sender: "1", token: "t", detail: "xyz")
        var whole: [UInt8] = []
        let b = batch([e, e], firstSeq: 1)
        b.bytes.withUnsafeBufferPointer { buffer in
            EncodedEvents.parse(buffer) { v in EncodedEvents.appendToRow(v, row: .init(seq: 1, at: 5, sender: nil), to: &whole) }
        }
        let full = EncodedEvents.events(inRow: whole, messageID: "m", token: "t", seq: 1, at: 5, sender: nil)
        #expect(full.count == 2)
        for cut in 0..<whole.count {
            let some = EncodedEvents.events(inRow: Array(whole[..<cut]), messageID: "m", token: "t", seq: 1, at: 5, sender: nil)
            #expect(some.count <= 1)
        }
        var badKind = whole
        badKind[2] = 200
        #expect(EncodedEvents.events(inRow: badKind, messageID: "m", token: "t", seq: 1, at: 5, sender: nil).isEmpty)
        for cut in 0..<b.bytes.count {
            var n = 0
            Array(b.bytes[..<cut]).withUnsafeBufferPointer { EncodedEvents.parse($0) { _ in n += 1 } }
            #expect(n <= 1)
        }
    }

    /// A journal written by the build before `RowFormat` (schema v2, blobs in the batch's format
    /// without message id and token) opens with its events converted, and takes new ones.
    @Test func aJournalInTheFormerFormatIsConverted() throws {
        let file = try path()
        let queue = try DatabaseQueue(path: file)
        try queue.write { db in
            try db.execute(sql: """
                CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                INSERT INTO grdb_migrations VALUES ('v1: entries'), ('v2: entries by last event');
                CREATE TABLE journal_token (id INTEGER PRIMARY KEY, token TEXT NOT NULL UNIQUE);
                CREATE TABLE journal_batch (first_seq INTEGER PRIMARY KEY, recorded_at INTEGER NOT NULL);
                CREATE TABLE journal_entry (seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL, first_at INTEGER NOT NULL,
                  last_at INTEGER NOT NULL, last_kind TEXT NOT NULL, n INTEGER NOT NULL, message_id TEXT NOT NULL,
                  sender TEXT, token_id INTEGER, topic TEXT, api TEXT, client_message_id TEXT, events BLOB NOT NULL);
                CREATE INDEX journal_entry_by_message ON journal_entry(message_id);
                CREATE INDEX journal_entry_by_last_seq ON journal_entry(last_seq);
                INSERT INTO journal_token(id, token) VALUES (1, 'tok-A');
                INSERT INTO journal_batch VALUES (1, 10);
                """)
            // The former blob: per event seq and time (8 bytes each), kind and API numbers, seven
            // texts as 4-byte lengths (all ones: none) with message id and token left out.
            func former(_ seq: Int64, _ at: Int64, _ kind: JournalEventKind, _ texts: [String?]) -> [UInt8] {
                var out: [UInt8] = []
                withUnsafeBytes(of: seq.littleEndian) { out.append(contentsOf: $0) }
                withUnsafeBytes(of: at.littleEndian) { out.append(contentsOf: $0) }
                out.append(UInt8(JournalEventKind.allCases.firstIndex(of: kind)!))
                out.append(0)
                for text in texts {
                    let bytes = text.map { Array($0.utf8) }
                    withUnsafeBytes(of: UInt32(bytes?.count ?? Int(UInt32.max)).littleEndian) { out.append(contentsOf: $0) }
                    out.append(contentsOf: bytes ?? [])
                }
                return out
            }
            for n in 0..<2500 {
                let seq = Int64(2 * n + 1)
                let blob = former(seq, 100, .handedOver, [nil, "123", nil, nil, "c1", nil, nil])
                    + former(seq + 1, 101, .deviceAcked, [nil, "123", nil, nil, nil, nil, "ok \(n)"])
                try db.execute(sql: """
                    INSERT INTO journal_entry VALUES (?, ?, 100, 101, 'device_acked', 2, ?, '123', 1, NULL, NULL, NULL, ?)
                    """, arguments: [seq, seq + 1, "0:\(n)%a", Data(blob)])
            }
        }
        try queue.close()
        let db = try JournalDatabase(path: file)
        for n in [0, 999, 1000, 2499] {
            let events = try db.events(messageID: "0:\(n)%a")
            #expect(events.map(\.kind) == [.handedOver, .deviceAcked])
            #expect(events.map(\.seq) == [Int64(2 * n + 1), Int64(2 * n + 2)])
            #expect(events.map(\.at) == [100, 101])
            #expect(events.map(\.sender) == ["123", "123"] && events.map(\.token) == ["tok-A", "tok-A"])
            #expect(events[0].connection == "c1" && events[1].detail == "ok \(n)" && events[1].connection == nil)
        }
        try db.insert(batch([JournalEvent(at: 200, kind: .accepted, messageID: "0:new%a", sender: "123", token: "tok-A",
                                          api: .ccs)], firstSeq: 5001), recordedAt: 20)
        #expect(try db.events(messageID: "0:new%a").map(\.api) == [.ccs])
    }
}

/// What pruning keeps of the journal's tables, and where a reopened journal goes on counting.
@Suite struct JournalPruningTests {
    private func database() throws -> JournalDatabase {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ccs-journal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return try JournalDatabase(path: dir.appendingPathComponent("journal.sqlite").path)
    }

    private func one(_ seq: Int64, sender: String = "123") -> EncodedEvents {
        var batch = EncodedEvents()
        var e = JournalEvent(at: 10, kind: .stored, messageID: "0:\(seq)%a", sender: sender, token: "tok")
        e.seq = seq
        batch.append(e)
        return batch
    }

    /// Pruning by count keeps the batch its oldest entry came in and the later ones: the others'
    /// rows went, where they once stayed until the age took them.
    @Test func pruningByCountTakesTheEmptyBatchesToo() throws {
        let db = try database()
        for seq in Int64(1)...10 { try db.insert(one(seq), recordedAt: 10) }
        #expect(try db.batchCount() == 10)
        #expect(try db.prune(keeping: 3, olderThan: 0) == 7)
        #expect(try db.count() == 3 && db.batchCount() == 3)
        #expect(try db.events(messageID: "0:8%a").count == 1 && db.events(messageID: "0:7%a").isEmpty)
        // The age still finds its batches: all written before the cut.
        #expect(try db.prune(keeping: 100, olderThan: 11) == 3)
        #expect(try db.count() == 0 && db.batchCount() == 0)
    }

    /// The newest seq comes from the newest batch's rows, or from every row when none of those is left.
    @Test func theLargestSeqSurvivesTheNewestBatchsRemoval() throws {
        let db = try database()
        try db.insert(one(1), recordedAt: 10)
        try db.insert(one(2, sender: "456"), recordedAt: 10)
        #expect(try db.largestSeq() == 2)
        try db.removeAll(sender: "456")
        #expect(try db.largestSeq() == 1)
    }
}

extension EncodedEvents {
    /// The batch's events, read back whole (tests compare them with what a row gives).
    var allEvents: [JournalEvent] {
        var all: [JournalEvent] = []
        bytes.withUnsafeBufferPointer { EncodedEvents.parse($0) { all.append($0.event) } }
        return all
    }
}
