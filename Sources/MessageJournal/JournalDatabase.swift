import Foundation
import GRDB
import PushDomain

/// The journal's own SQLite file (`journal.sqlite` in the data directory): kept apart from the
/// store's so that its writes never wait for, or delay, the store's group commits.
struct JournalDatabase: Sendable {
    let pool: DatabasePool

    init(path: String) throws {
        var config = Configuration()
        config.prepareDatabase { db in
            // The journal is a record of what happened, not state a client was promised: NORMAL in WAL
            // loses nothing when the process dies, only (possibly) the last batch on a power cut.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        pool = try DatabasePool(path: path, configuration: config)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: journal") { db in
            try db.execute(sql: """
                CREATE TABLE journal_event (
                  seq INTEGER PRIMARY KEY,
                  at INTEGER NOT NULL,
                  recorded_at INTEGER NOT NULL,
                  kind TEXT NOT NULL,
                  message_id TEXT NOT NULL,
                  sender TEXT,
                  token TEXT,
                  topic TEXT,
                  api TEXT,
                  connection TEXT,
                  client_message_id TEXT,
                  detail TEXT
                );
                CREATE INDEX journal_event_by_message ON journal_event(message_id);
                CREATE INDEX journal_event_by_token ON journal_event(token) WHERE token IS NOT NULL;
                CREATE INDEX journal_event_by_sender ON journal_event(sender) WHERE sender IS NOT NULL;
                CREATE INDEX journal_event_by_recorded_at ON journal_event(recorded_at);
                """)
        }
        try migrator.migrate(pool)
    }

    func largestSeq() throws -> Int64 {
        try pool.read { db in try Int64.fetchOne(db, sql: "SELECT MAX(seq) FROM journal_event") ?? 0 }
    }

    func insert(_ events: [JournalEvent], recordedAt: Int64) throws {
        try pool.write { db in
            let statement = try db.cachedStatement(sql: """
                INSERT OR REPLACE INTO journal_event(seq, at, recorded_at, kind, message_id, sender, token, topic, api,
                  connection, client_message_id, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            for e in events {
                try statement.execute(arguments: [e.seq, e.at, recordedAt, e.kind.rawValue, e.messageID, e.sender, e.token,
                                                  e.topic, e.api?.rawValue, e.connection, e.clientMessageID, e.detail])
            }
        }
    }

    /// Drops what is past the retention: events recorded before `olderThan` (wall ms), and all but
    /// the newest `keeping` events. Returns how many went.
    func prune(keeping: Int, olderThan: Int64) throws -> Int {
        try pool.write { db in
            try db.execute(sql: "DELETE FROM journal_event WHERE recorded_at < ?", arguments: [olderThan])
            var removed = db.changesCount
            if let newest = try Int64.fetchOne(db, sql: "SELECT MAX(seq) FROM journal_event") {
                try db.execute(sql: "DELETE FROM journal_event WHERE seq <= ?", arguments: [newest - Int64(keeping)])
                removed += db.changesCount
            }
            return removed
        }
    }

    func removeAll() throws {
        try pool.write { db in try db.execute(sql: "DELETE FROM journal_event") }
    }

    func removeAll(sender: String) throws {
        try pool.write { db in
            try db.execute(sql: """
                DELETE FROM journal_event WHERE message_id IN (SELECT message_id FROM journal_event WHERE sender = ?)
                """, arguments: [sender])
        }
    }

    func count() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM journal_event") ?? 0 }
    }

    // MARK: queries

    func events(messageID: String) throws -> [JournalEvent] {
        try pool.read { db in
            var rows = try Row.fetchAll(db, sql: "SELECT * FROM journal_event WHERE message_id = ? ORDER BY seq",
                                        arguments: [messageID])
            if rows.isEmpty {
                // The id the app server chose: every message it sent with that id (a retry reuses it),
                // with the faults applied to it, in order.
                rows = try Row.fetchAll(db, sql: """
                    SELECT * FROM journal_event WHERE message_id IN
                      (SELECT message_id FROM journal_event WHERE client_message_id = ?)
                    ORDER BY seq
                    """, arguments: [messageID])
            }
            return rows.map(Self.event)
        }
    }

    /// Most tokens a summary lists (a topic message's audience can be large).
    static let summaryTokens = 20

    func messages(_ filter: JournalFilter) throws -> [JournalMessageSummary] {
        var conditions: [String] = []
        var arguments: [(any DatabaseValueConvertible)?] = []
        if let sender = filter.sender { conditions.append("sender = ?"); arguments.append(sender) }
        if let token = filter.token { conditions.append("token = ?"); arguments.append(token) }
        if let topic = filter.topic { conditions.append("topic = ?"); arguments.append(topic) }
        if let since = filter.since { conditions.append("at >= ?"); arguments.append(since) }
        let matched = conditions.isEmpty
            ? "SELECT DISTINCT message_id FROM journal_event"
            : "SELECT DISTINCT message_id FROM journal_event WHERE " + conditions.joined(separator: " AND ")
        var sql = """
            WITH matched AS (\(matched)),
            m AS (
              SELECT e.message_id, MIN(e.seq) AS first_seq, MAX(e.seq) AS last_seq, MIN(e.at) AS first_at,
                MAX(e.at) AS last_at, COUNT(*) AS n, MAX(e.sender) AS sender, MAX(e.topic) AS topic, MAX(e.api) AS api,
                MAX(e.client_message_id) AS client_message_id
              FROM journal_event e JOIN matched USING (message_id) GROUP BY e.message_id
            )
            SELECT m.*, last.kind AS status,
              (SELECT group_concat(token, ' ') FROM (SELECT DISTINCT token FROM journal_event t
                 WHERE t.message_id = m.message_id AND t.token IS NOT NULL LIMIT \(Self.summaryTokens))) AS tokens
            FROM m JOIN journal_event last ON last.seq = m.last_seq
            """
        if let status = filter.status { sql += " WHERE last.kind = ?"; arguments.append(status.rawValue) }
        sql += " ORDER BY m.first_seq DESC LIMIT ?"
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

    private static func event(_ row: Row) -> JournalEvent {
        var e = JournalEvent(at: row["at"], kind: JournalEventKind(rawValue: row["kind"]) ?? .accepted,
                             messageID: row["message_id"], sender: row["sender"], token: row["token"],
                             topic: row["topic"], api: (row["api"] as String?).flatMap(SendAPI.init(rawValue:)),
                             connection: row["connection"], clientMessageID: row["client_message_id"],
                             detail: row["detail"])
        e.seq = row["seq"]
        return e
    }
}
