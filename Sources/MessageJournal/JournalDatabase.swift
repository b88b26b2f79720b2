import Foundation
import GRDB
import GRDBSQLite
import Locking
import PushDomain
import Synchronization

/// The journal's own SQLite file (`journal.sqlite` in the data directory): kept apart from the
/// store's so that its writes never wait for, or delay, the store's group commits.
struct JournalDatabase: Sendable {
    let pool: DatabasePool
    /// token → its number in `journal_token`; written only inside the pool's write transactions.
    private let tokenIDs: TokenIDs

    init(path: String, cachedTokens: Int = 20_000, forgetUnusedTokensEvery: Int = 10_000) throws {
        tokenIDs = TokenIDs(limit: cachedTokens, forgetEvery: forgetUnusedTokensEvery)
        var config = Configuration()
        config.prepareDatabase { db in
            // The journal is a record of what happened, not state a client was promised. In WAL mode
            // OFF loses nothing when the process dies (the OS has every write); a power cut may lose
            // the last batches or, rarely, the file (the emulator then starts a new one, keeping the
            // old aside). The fsyncs of NORMAL's checkpoints cost a third of the journal's overhead.
            try db.execute(sql: "PRAGMA synchronous = OFF")
        }
        pool = try DatabasePool(path: path, configuration: config)
        var migrator = DatabaseMigrator()
        // One row per message and device per batch (handed over, confirmed and answered usually land
        // in the same batch); the row holds what queries filter on, and its `events` are the events'
        // bytes in `EncodedEvents.RowFormat` (v3), without the message id and token the row holds once.
        // A token is stored once (`journal_token`); when a batch was written is kept per batch
        // (`journal_batch`, for pruning by age). The one index is the message id's (the last event's
        // of v2 went in v4): per-event indexes on the token and the time cost the writer more than
        // anything else it did.
        // (A journal file from before this layout fails this migration and is set aside:
        // `Emulator.openJournal`.)
        migrator.registerMigration("v1: entries") { db in
            try db.execute(sql: """
                CREATE TABLE journal_token (id INTEGER PRIMARY KEY, token TEXT NOT NULL UNIQUE);
                CREATE TABLE journal_batch (first_seq INTEGER PRIMARY KEY, recorded_at INTEGER NOT NULL);
                CREATE TABLE journal_entry (
                  seq INTEGER PRIMARY KEY,
                  last_seq INTEGER NOT NULL,
                  first_at INTEGER NOT NULL,
                  last_at INTEGER NOT NULL,
                  last_kind TEXT NOT NULL,
                  n INTEGER NOT NULL,
                  message_id TEXT NOT NULL,
                  sender TEXT,
                  token_id INTEGER,
                  topic TEXT,
                  api TEXT,
                  client_message_id TEXT,
                  events BLOB NOT NULL
                );
                CREATE INDEX journal_entry_by_message ON journal_entry(message_id);
                """)
        }
        // Pruning by count read and deleted by `last_seq`: without an index each prune (once a second)
        // read the whole table twice, about a fifth of a core on an idle node with a full journal.
        // (v4 drops it: pruning goes by `seq` now.)
        migrator.registerMigration("v2: entries by last event") { db in
            try db.execute(sql: "CREATE INDEX journal_entry_by_last_seq ON journal_entry(last_seq)")
        }
        // Event blobs from the batch's format to the row's (`EncodedEvents.RowFormat`), a thousand rows
        // at a time (a statement must not update the table it is still reading).
        migrator.registerMigration("v3: compact event blobs") { db in
            var after = Int64.min
            while true {
                let rows = try Row.fetchAll(db, sql: """
                    SELECT seq, first_at, sender, events FROM journal_entry WHERE seq > ? ORDER BY seq LIMIT 1000
                    """, arguments: [after])
                guard let last = rows.last else { break }
                after = last[0]
                let update = try db.cachedStatement(sql: "UPDATE journal_entry SET events = ? WHERE seq = ?")
                for row in rows {
                    let seq: Int64 = row[0], at: Int64 = row[1], sender: String? = row[2]
                    let old = Array(row[3] as Data)
                    var blob: [UInt8] = []
                    Array((sender ?? "").utf8).withUnsafeBufferPointer { senderBuffer in
                        let format = EncodedEvents.RowFormat(seq: seq, at: at, sender: sender == nil ? nil : senderBuffer)
                        old.withUnsafeBufferPointer { buffer in
                            EncodedEvents.parse(buffer) { e in EncodedEvents.appendToRow(e, row: format, to: &blob) }
                        }
                    }
                    try update.execute(arguments: [Data(blob), seq])
                }
            }
        }
        // Pruning by count goes by `seq` (the rowid) since v4: an entry holds one batch's events, so
        // its first event places it to within a batch, and the index on `last_seq` was a second
        // insert into a B-tree for every row the writer wrote.
        migrator.registerMigration("v4: no index on the last event") { db in
            try db.execute(sql: "DROP INDEX IF EXISTS journal_entry_by_last_seq")
        }
        // A row keeps its furthest event's kind (`JournalEventKind.progress`), no longer its last's: a
        // message's status is the furthest state it reached. Rows written before keep their last kind.
        migrator.registerMigration("v5: the furthest kind of a row") { db in
            try db.execute(sql: "ALTER TABLE journal_entry RENAME COLUMN last_kind TO furthest_kind")
        }
        try migrator.migrate(pool)
        let known = try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT id, token FROM journal_token ORDER BY id DESC LIMIT ?",
                             arguments: [tokenIDs.limit]).map { (row: Row) in (row[1] as String, row[0] as Int64) }
        }
        tokenIDs.ids.withLock { ids in
            for (token, id) in known { ids[TokenIDs.hash(Array(token.utf8)), default: []].append((Array(token.utf8), id)) }
        }
    }

    /// The newest event's seq. Its row is in the newest batch (seqs only grow), so only that batch's
    /// rows are read, unless none is left of it (`removeAll(sender:)`): then every row.
    func largestSeq() throws -> Int64 {
        try pool.read { db in
            if let seq = try Int64.fetchOne(db, sql: """
                SELECT MAX(last_seq) FROM journal_entry WHERE seq >= (SELECT MAX(first_seq) FROM journal_batch)
                """) {
                return seq
            }
            return try Int64.fetchOne(db, sql: "SELECT MAX(last_seq) FROM journal_entry") ?? 0
        }
    }

    /// Rows per INSERT statement: one statement execution per 32 events instead of one per event.
    static let rowsPerStatement = 32

    /// One message's events for one device (or for none) within a batch: its events are a chain
    /// through `InsertScratch.next`, from `firstEvent` to `lastEvent`.
    struct Entry {
        var firstEvent: Int32
        var lastEvent: Int32
        /// The kind of its furthest event (the row's `furthest_kind`).
        var furthest: JournalEventKind
        var n: Int32 = 1
        /// The next entry whose key hashed the same (-1: none).
        var sameKey: Int32 = -1
        var sender: UnsafeBufferPointer<UInt8>?
        var topic: UnsafeBufferPointer<UInt8>?
        var api: SendAPI?
        var client: UnsafeBufferPointer<UInt8>?
        /// Where its events are in `InsertScratch.blobs`, in the row's format.
        var blob: Range<Int> = 0..<0
    }

    /// The writer's working memory for a batch, kept from one batch to the next. Made anew per batch,
    /// its arrays (a few hundred KiB under load) were each a `mmap`, page faults and a `munmap`
    /// (the process fixes glibc's mmap threshold: `MallocTuning`): two fifths of the writer's time in
    /// the kernel.
    final class InsertScratch {
        var views: [EncodedEvents.View] = []
        /// Per event, the next event of its entry (-1: none).
        var next: [Int32] = []
        var entries: [Entry] = []
        /// Key hash → the first entry with it (`Entry.sameKey` chains the rest).
        var byKey: [UInt64: Int32] = [:]
        var blobs: [UInt8] = []

        /// Past this many events a burst's arrays are let go rather than kept.
        static let keptEvents = 16_384

        func reset() {
            if views.capacity > Self.keptEvents {
                views = []; next = []; entries = []; byKey = [:]; blobs = []
            } else {
                views.removeAll(keepingCapacity: true)
                next.removeAll(keepingCapacity: true)
                entries.removeAll(keepingCapacity: true)
                byKey.removeAll(keepingCapacity: true)
                blobs.removeAll(keepingCapacity: true)
            }
        }
    }

    func insert(_ events: EncodedEvents, recordedAt: Int64, scratch: InsertScratch = InsertScratch()) throws {
        defer { scratch.reset() }  // empty for the next batch, whatever happens to this one
        // The views point into `buffer`: every step below runs inside this closure.
        try events.bytes.withUnsafeBufferPointer { buffer in
            EncodedEvents.parse(buffer) { e in Self.group(e, into: scratch) }
            Self.encodeRows(scratch)
            let entries = scratch.entries, views = scratch.views
            guard let firstEntry = entries.first else { return }
            let firstSeq = views[Int(firstEntry.firstEvent)].seq
            try scratch.blobs.withUnsafeBufferPointer { blobs in try pool.write { db in
                try db.cachedStatement(sql: "INSERT OR REPLACE INTO journal_batch(first_seq, recorded_at) VALUES (?, ?)")
                    .execute(arguments: [firstSeq, recordedAt])
                let columns = "(seq, last_seq, first_at, last_at, furthest_kind, n, message_id, sender, token_id, topic, api, client_message_id, events)"
                let row = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                let full = try db.cachedStatement(sql: "INSERT OR REPLACE INTO journal_entry\(columns) VALUES "
                    + Array(repeating: row, count: Self.rowsPerStatement).joined(separator: ", "))
                let single = try db.cachedStatement(sql: "INSERT OR REPLACE INTO journal_entry\(columns) VALUES " + row)
                var start = 0
                while entries.count - start >= Self.rowsPerStatement {
                    try flush(entries[start..<start + Self.rowsPerStatement], full, views: views, blobs: blobs, db: db)
                    start += Self.rowsPerStatement
                }
                while start < entries.count {
                    try flush(entries[start..<start + 1], single, views: views, blobs: blobs, db: db)
                    start += 1
                }
            } }
        }
    }

    /// Adds one event to the batch's entries: grouped by message and device, in order of first
    /// appearance.
    private static func group(_ e: EncodedEvents.View, into scratch: InsertScratch) {
        let index = Int32(scratch.views.count)
        scratch.views.append(e)
        scratch.next.append(-1)
        let key = TokenIDs.hash(e.texts.0 ?? UnsafeBufferPointer(start: nil, count: 0)) &* 31
            &+ TokenIDs.hash(e.texts.2 ?? UnsafeBufferPointer(start: nil, count: 0))
        var candidate = scratch.byKey[key] ?? -1
        while candidate >= 0 {
            let first = scratch.views[Int(scratch.entries[Int(candidate)].firstEvent)]
            if same(first.texts.0, e.texts.0) && same(first.texts.2, e.texts.2) { break }
            candidate = scratch.entries[Int(candidate)].sameKey
        }
        guard candidate >= 0 else {
            scratch.entries.append(Entry(firstEvent: index, lastEvent: index, furthest: e.kind, sameKey: scratch.byKey[key] ?? -1,
                                         sender: e.texts.1, topic: e.texts.3, api: e.api, client: e.texts.5))
            scratch.byKey[key] = Int32(scratch.entries.count - 1)
            return
        }
        let c = Int(candidate)
        scratch.next[Int(scratch.entries[c].lastEvent)] = index
        scratch.entries[c].lastEvent = index
        scratch.entries[c].n += 1
        if e.kind.progress >= scratch.entries[c].furthest.progress { scratch.entries[c].furthest = e.kind }
        if scratch.entries[c].sender == nil { scratch.entries[c].sender = e.texts.1 }
        if scratch.entries[c].topic == nil { scratch.entries[c].topic = e.texts.3 }
        if scratch.entries[c].api == nil { scratch.entries[c].api = e.api }
        if scratch.entries[c].client == nil { scratch.entries[c].client = e.texts.5 }
    }

    /// Each entry's events in the row's format, against its settled sender (its first event's that
    /// has one), one after another in one buffer.
    private static func encodeRows(_ scratch: InsertScratch) {
        for k in scratch.entries.indices {
            let entry = scratch.entries[k]
            let first = scratch.views[Int(entry.firstEvent)]
            let row = EncodedEvents.RowFormat(seq: first.seq, at: first.at, sender: entry.sender)
            let start = scratch.blobs.count
            var event = entry.firstEvent
            while event >= 0 {
                EncodedEvents.appendToRow(scratch.views[Int(event)], row: row, to: &scratch.blobs)
                event = scratch.next[Int(event)]
            }
            scratch.entries[k].blob = start..<scratch.blobs.count
        }
    }

    /// Inserts `chunk` with one step of `statement` (made for exactly that many rows). Bound through
    /// SQLite's C API without copies: GRDB's `StatementArguments` box every value, which made
    /// argument building the largest part of the writer's work.
    private func flush(_ chunk: ArraySlice<Entry>, _ statement: Statement, views: [EncodedEvents.View],
                       blobs: UnsafeBufferPointer<UInt8>, db: Database) throws {
        let stmt = statement.sqliteStatement
        sqlite3_reset(stmt)
        for (k, entry) in chunk.enumerated() {
            let base = Int32(k * 13)
            let first = views[Int(entry.firstEvent)], last = views[Int(entry.lastEvent)]
            sqlite3_bind_int64(stmt, base + 1, first.seq)
            sqlite3_bind_int64(stmt, base + 2, last.seq)
            sqlite3_bind_int64(stmt, base + 3, first.at)
            sqlite3_bind_int64(stmt, base + 4, max(first.at, last.at))
            sqlite3_bind_text(stmt, base + 5, Self.kindNames[entry.furthest]!, -1, nil)
            sqlite3_bind_int64(stmt, base + 6, Int64(entry.n))
            Self.bind(stmt, base + 7, first.texts.0)
            Self.bind(stmt, base + 8, entry.sender)
            if let token = first.texts.2 {
                sqlite3_bind_int64(stmt, base + 9, try tokenID(token, db))
            } else {
                sqlite3_bind_null(stmt, base + 9)
            }
            Self.bind(stmt, base + 10, entry.topic)
            if let api = entry.api { sqlite3_bind_text(stmt, base + 11, Self.apiNames[api]!, -1, nil) } else { sqlite3_bind_null(stmt, base + 11) }
            Self.bind(stmt, base + 12, entry.client)
            // Not copied (a nil destructor is SQLITE_STATIC): `blobs` outlives the step.
            _ = sqlite3_bind_blob(stmt, base + 13, blobs.baseAddress.map { $0 + entry.blob.lowerBound },
                                  Int32(entry.blob.count), nil)
        }
        let code = sqlite3_step(stmt)
        sqlite3_reset(stmt)
        sqlite3_clear_bindings(stmt)
        guard code == SQLITE_DONE else {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
        }
    }

    private static func same(_ a: UnsafeBufferPointer<UInt8>?, _ b: UnsafeBufferPointer<UInt8>?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (let a?, let b?): return equal(a, b)
        default: return false
        }
    }

    /// `memcmp`: the generic `elementsEqual` compared 150-byte tokens a byte at a time, a fifth of
    /// what the writer spent grouping a batch.
    static func equal(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        guard let x = a.baseAddress, let y = b.baseAddress else { return true }
        return memcmp(x, y, a.count) == 0
    }

    /// The token's number, given the first time it is seen (inside the caller's write transaction).
    /// Looked up by a hash of its bytes, without making a `String` per event: that allocation and
    /// hashing 150 bytes through `Hasher` were most of what the writer spent outside SQLite.
    private func tokenID(_ token: UnsafeBufferPointer<UInt8>, _ db: Database) throws -> Int64 {
        let hash = TokenIDs.hash(token)
        if let id = tokenIDs.ids.withLock({ ids in ids[hash]?.first(where: { known in known.bytes.withUnsafeBufferPointer { Self.equal($0, token) } })?.id }) {
            return id
        }
        let text = String(decoding: token, as: UTF8.self)
        try db.cachedStatement(sql: "INSERT OR IGNORE INTO journal_token(token) VALUES (?)").execute(arguments: [text])
        let id = try Int64.fetchOne(db.cachedStatement(sql: "SELECT id FROM journal_token WHERE token = ?"), arguments: [text])!
        tokenIDs.ids.withLock { ids in
            // Bounded: past the limit the map starts over and refills as tokens come back (a miss
            // costs the two statements above), so a server that sees millions of tokens keeps a few.
            if ids.count >= tokenIDs.limit { ids.removeAll(keepingCapacity: true) }
            ids[hash, default: []].append((Array(token), id))
        }
        tokenIDs.added.add(1, ordering: .relaxed)
        return id
    }

    /// Forgets the tokens no entry names any more, and the numbers the writer keeps for them in
    /// memory (inside a write transaction, as every use of those numbers is). `journal_token` has no
    /// other way out, and with devices coming and going it would only grow.
    private func forgetUnusedTokens(_ db: Database) throws {
        try db.execute(sql: """
            DELETE FROM journal_token WHERE id NOT IN (SELECT token_id FROM journal_entry WHERE token_id IS NOT NULL)
            """)
        tokenIDs.ids.withLock { $0.removeAll() }
        tokenIDs.added.store(0, ordering: .relaxed)
    }

    /// How many batches `journal_batch` remembers (for tests).
    func batchCount() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM journal_batch") ?? 0 }
    }

    /// How many tokens `journal_token` holds (for tests).
    func tokenCount() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM journal_token") ?? 0 }
    }

    /// Bound without a copy (a nil destructor is SQLITE_STATIC): the bytes are the batch's, which
    /// outlives the statement's step; the statement is reset and its bindings cleared right after.
    private static func bind(_ stmt: OpaquePointer?, _ index: Int32, _ bytes: UnsafeBufferPointer<UInt8>?) {
        guard let bytes else {
            sqlite3_bind_null(stmt, index)
            return
        }
        guard let base = bytes.baseAddress, !bytes.isEmpty else {
            sqlite3_bind_text(stmt, index, Self.empty, 0, nil)
            return
        }
        base.withMemoryRebound(to: CChar.self, capacity: bytes.count) { chars in
            _ = sqlite3_bind_text(stmt, index, chars, Int32(bytes.count), nil)
        }
    }

    /// C strings made once and never freed or changed (so shared without a lock), bound without copies.
    nonisolated(unsafe) private static let empty: UnsafePointer<CChar> = UnsafePointer(strdup("")!)
    nonisolated(unsafe) private static let kindNames: [JournalEventKind: UnsafePointer<CChar>] = Dictionary(
        uniqueKeysWithValues: JournalEventKind.allCases.map { ($0, UnsafePointer(strdup($0.rawValue)!)) })
    nonisolated(unsafe) private static let apiNames: [SendAPI: UnsafePointer<CChar>] = Dictionary(
        uniqueKeysWithValues: SendAPI.allCases.map { ($0, UnsafePointer(strdup($0.rawValue)!)) })

    /// Drops what is past the retention: events recorded before `olderThan` (wall ms), and all but
    /// about the newest `keeping` events (an entry goes whole once its first event is past the count;
    /// it holds one batch's events). Returns how many events went.
    func prune(keeping: Int, olderThan: Int64) throws -> Int {
        try pool.write { db in
            var removed = 0
            func delete(_ condition: String, _ arguments: StatementArguments) throws {
                removed += try Int.fetchOne(db, sql: "SELECT IFNULL(SUM(n), 0) FROM journal_entry WHERE " + condition,
                                            arguments: arguments) ?? 0
                try db.execute(sql: "DELETE FROM journal_entry WHERE " + condition, arguments: arguments)
            }
            // By age: everything before the first batch written at or after the cut. Read in seq order,
            // the batches before the cut having gone with their entries: the scan stops at once.
            if let keepFrom = try Int64.fetchOne(db, sql: """
                SELECT first_seq FROM journal_batch WHERE recorded_at >= ? ORDER BY first_seq LIMIT 1
                """, arguments: [olderThan]) {
                try delete("seq < ?", [keepFrom])
                try db.execute(sql: "DELETE FROM journal_batch WHERE first_seq < ?", arguments: [keepFrom])
            } else {
                try delete("1", [])
                try db.execute(sql: "DELETE FROM journal_batch")
            }
            if let newest = try Int64.fetchOne(db, sql: "SELECT MAX(seq) FROM journal_entry") {
                try delete("seq <= ?", [newest - Int64(keeping)])
            }
            // The batches no entry is left in, but the one the oldest entry belongs to: pruning by count
            // leaves them behind, and kept they grew by one row per batch for as long as the age
            // allows (50 a second under load), read whole by the age's query above.
            try db.execute(sql: """
                DELETE FROM journal_batch WHERE first_seq <
                  (SELECT MAX(first_seq) FROM journal_batch WHERE first_seq <= (SELECT MIN(seq) FROM journal_entry))
                """)
            // Only once enough new tokens came: the statement reads every entry (there is no index
            // on their token, on purpose).
            if tokenIDs.added.load(ordering: .relaxed) >= tokenIDs.forgetEvery { try forgetUnusedTokens(db) }
            return removed
        }
    }

    func removeAll() throws {
        try pool.write { db in
            try db.execute(sql: "DELETE FROM journal_entry")
            try db.execute(sql: "DELETE FROM journal_batch")
            try forgetUnusedTokens(db)
        }
    }

    func removeAll(sender: String) throws {
        try pool.write { db in
            try db.execute(sql: """
                DELETE FROM journal_entry WHERE message_id IN (SELECT message_id FROM journal_entry WHERE sender = ?)
                """, arguments: [sender])
        }
    }

    func count() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT IFNULL(SUM(n), 0) FROM journal_entry") ?? 0 }
    }

    // MARK: queries

    func events(messageID: String) throws -> [JournalEvent] {
        try pool.read { db in
            let select = """
                SELECT e.message_id, t.token, e.events, e.seq, e.first_at, e.sender FROM journal_entry e
                LEFT JOIN journal_token t ON t.id = e.token_id
                """
            var rows = try Row.fetchAll(db, sql: select + " WHERE e.message_id = ?", arguments: [messageID])
            if rows.isEmpty {
                // The id the app server chose: every message it sent with that id (a retry reuses it),
                // with the faults applied to it, in order.
                rows = try Row.fetchAll(db, sql: select + """
                     WHERE e.message_id IN (SELECT message_id FROM journal_entry WHERE client_message_id = ?)
                    """, arguments: [messageID])
            }
            return rows.flatMap { row in
                EncodedEvents.events(inRow: Array(row[2] as Data), messageID: row[0], token: row[1], seq: row[3],
                                     at: row[4], sender: row[5])
            }.sorted { $0.seq < $1.seq }
        }
    }

    func events(after seq: Int64, limit: Int) throws -> [JournalEvent] {
        guard seq >= 0, seq < Int64.max, limit > 0 else { return [] }
        return try pool.read { db in
            // An entry holds events of one batch, and its `seq` is its first event's: every entry with an
            // event after `seq` is in the batch holding `seq + 1` or a later one.
            let rows = try Row.fetchAll(db, sql: """
                SELECT e.message_id, t.token, e.events, e.seq, e.first_at, e.sender FROM journal_entry e
                LEFT JOIN journal_token t ON t.id = e.token_id
                WHERE e.seq >= (SELECT IFNULL(MAX(first_seq), 0) FROM journal_batch WHERE first_seq <= ?)
                  AND e.last_seq > ?
                ORDER BY e.seq LIMIT ?
                """, arguments: [seq + 1, seq, limit])
            let events = rows.flatMap { row in
                EncodedEvents.events(inRow: Array(row[2] as Data), messageID: row[0], token: row[1], seq: row[3],
                                     at: row[4], sender: row[5])
            }
            return Array(events.filter { $0.seq > seq }.sorted { $0.seq < $1.seq }.prefix(limit))
        }
    }

    /// `JournalEventKind.progress` of a kind column, in SQL: a message's status is its rows' furthest.
    static func progressSQL(_ column: String) -> String {
        "CASE \(column) " + JournalEventKind.allCases.map { "WHEN '\($0.rawValue)' THEN \($0.progress)" }.joined(separator: " ")
            + " ELSE 0 END"
    }

    /// Most tokens a summary lists (a topic message's audience can be large).
    static let summaryTokens = 20

    func messages(_ filter: JournalFilter) throws -> [JournalMessageSummary] {
        var conditions: [String] = []
        var arguments: [(any DatabaseValueConvertible)?] = []
        if let sender = filter.sender { conditions.append("e.sender = ?"); arguments.append(sender) }
        if let token = filter.token {
            conditions.append("e.token_id = (SELECT id FROM journal_token WHERE token = ?)")
            arguments.append(token)
        }
        if let topic = filter.topic { conditions.append("e.topic = ?"); arguments.append(topic) }
        if let since = filter.since { conditions.append("e.last_at >= ?"); arguments.append(since) }
        let matched = "SELECT DISTINCT e.message_id FROM journal_entry e"
            + (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND "))
        var sql = """
            WITH matched AS (\(matched)),
            m AS (
              SELECT e.message_id, MIN(e.seq) AS first_seq, MAX(e.last_seq) AS last_seq, MIN(e.first_at) AS first_at,
                MAX(e.last_at) AS last_at, SUM(e.n) AS n, MAX(e.sender) AS sender, MAX(e.topic) AS topic, MAX(e.api) AS api,
                MAX(e.client_message_id) AS client_message_id
              FROM journal_entry e JOIN matched USING (message_id) GROUP BY e.message_id
            ),
            s AS (
              SELECT m.*,
                (SELECT x.furthest_kind FROM journal_entry x WHERE x.message_id = m.message_id
                   ORDER BY \(Self.progressSQL("x.furthest_kind")) DESC, x.last_seq DESC LIMIT 1) AS status,
                (SELECT group_concat(token, ' ') FROM (SELECT DISTINCT t.token FROM journal_entry x
                   JOIN journal_token t ON t.id = x.token_id WHERE x.message_id = m.message_id LIMIT \(Self.summaryTokens))) AS tokens
              FROM m
            )
            SELECT * FROM s
            """
        if let status = filter.status { sql += " WHERE status = ?"; arguments.append(status.rawValue) }
        sql += " ORDER BY first_seq DESC LIMIT ?"
        arguments.append(min(max(filter.limit, 1), JournalFilter.maximumLimit))
        let statementArguments = StatementArguments(arguments.map { $0?.databaseValue ?? .null })
        return try pool.read { db in
            try Row.fetchAll(db, sql: sql, arguments: statementArguments).map { row in
                let tokens: String? = row["tokens"]
                return JournalMessageSummary(
                    messageID: row["message_id"], sender: row["sender"],
                    tokens: tokens.map { $0.split(separator: " ").map(String.init) } ?? [],
                    topic: row["topic"], api: (row["api"] as String?).flatMap(SendAPI.init(rawValue:)),
                    clientMessageID: row["client_message_id"],
                    status: JournalEventKind(rawValue: row["status"]) ?? .accepted,
                    firstAt: row["first_at"], lastAt: row["last_at"], events: row["n"])
            }
        }
    }
}
/// The token numbers the writer has given (shared by the copies of the `JournalDatabase` value).
final class TokenIDs: Sendable {
    /// FNV-1a of the token's bytes → the tokens with that hash and their numbers.
    let ids = Locked<[UInt64: [(bytes: [UInt8], id: Int64)]]>([:])
    /// Tokens kept in `ids` at most (each a copy of its token, about 150 bytes, plus the map's overhead).
    let limit: Int
    /// Tokens added to `journal_token` since unused ones were last forgotten, and how many make the
    /// pruning forget them.
    let added = Atomic<Int>(0)
    let forgetEvery: Int

    init(limit: Int, forgetEvery: Int) {
        self.limit = limit
        self.forgetEvery = forgetEvery
    }

    static func hash<C: Collection>(_ bytes: C) -> UInt64 where C.Element == UInt8 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
        return h
    }
}
