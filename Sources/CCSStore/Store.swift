import Foundation
import GRDB

/// Durable state in SQLite (WAL mode) through GRDB.
///
/// Writes go through `apply(_:)`, one transaction per batch; `GroupCommitter` is what batches them.
/// Reads (`loadSenders`, `queuedMessages`, …) use GRDB's reader connections and may run on any thread.
public final class Store: Sendable {
    public enum Durability: String, Sendable, CaseIterable {
        /// `synchronous=FULL`: a committed batch survives power loss (fsync on every commit).
        case full
        /// `synchronous=NORMAL`: survives a crash of the process (kill -9), not of the machine.
        case normal
    }

    private let pool: DatabasePool
    public let path: String

    public init(path: String, durability: Durability = .full) throws {
        self.path = path
        var config = Configuration()
        config.busyMode = .timeout(5)
        let sync = durability == .full ? "FULL" : "NORMAL"
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(sync)")
        }
        pool = try DatabasePool(path: path, configuration: config)
        try Self.migrator.migrate(pool)
    }

    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE sender (
                  sender_id TEXT PRIMARY KEY NOT NULL,
                  server_key TEXT NOT NULL,
                  created_at INTEGER NOT NULL
                );
                CREATE TABLE device (
                  token TEXT PRIMARY KEY NOT NULL,
                  device_id TEXT NOT NULL UNIQUE,
                  secret TEXT NOT NULL,
                  app TEXT NOT NULL,
                  platform TEXT NOT NULL,
                  senders TEXT NOT NULL,
                  created_at INTEGER NOT NULL,
                  status TEXT NOT NULL,
                  state TEXT NOT NULL
                );
                CREATE TABLE queued_message (
                  seq INTEGER PRIMARY KEY AUTOINCREMENT,
                  token TEXT NOT NULL,
                  device_message_id TEXT NOT NULL,
                  sender_id TEXT NOT NULL,
                  app_message_id TEXT NOT NULL,
                  collapse_key TEXT,
                  priority TEXT NOT NULL,
                  ttl INTEGER NOT NULL,
                  enqueued_at INTEGER NOT NULL,
                  expires_at INTEGER NOT NULL,
                  receipt INTEGER NOT NULL,
                  payload TEXT NOT NULL
                );
                CREATE UNIQUE INDEX queued_message_by_token ON queued_message(token, device_message_id);
                CREATE TABLE meta (
                  key TEXT PRIMARY KEY NOT NULL,
                  value TEXT NOT NULL
                );
                """)
        }
        return m
    }

    // MARK: writes

    /// Applies every op in one transaction: all or nothing.
    public func apply(_ ops: [StoreOp]) throws {
        try pool.write { db in
            for op in ops { try Self.apply(op, in: db) }
        }
    }

    private static func apply(_ op: StoreOp, in db: Database) throws {
        switch op {
        case .upsertSender(let s):
            try db.execute(sql: """
                INSERT INTO sender(sender_id, server_key, created_at) VALUES (?, ?, ?)
                ON CONFLICT(sender_id) DO UPDATE SET server_key = excluded.server_key
                """, arguments: [s.senderID, s.serverKey, s.createdAt])
        case .upsertDevice(let d):
            try db.execute(sql: """
                INSERT INTO device(token, device_id, secret, app, platform, senders, created_at, status, state)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(token) DO UPDATE SET secret = excluded.secret, app = excluded.app,
                  platform = excluded.platform, senders = excluded.senders, status = excluded.status,
                  state = excluded.state
                """, arguments: [d.token, d.deviceID, d.secret, d.app, d.platform,
                                 d.senders.joined(separator: ","), d.createdAt, d.status, d.state])
        case .enqueue(let m):
            try db.execute(sql: """
                INSERT OR REPLACE INTO queued_message(token, device_message_id, sender_id, app_message_id,
                  collapse_key, priority, ttl, enqueued_at, expires_at, receipt, payload)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [m.token, m.deviceMessageID, m.senderID, m.appMessageID, m.collapseKey,
                                 m.priority, m.timeToLive, m.enqueuedAt, m.expiresAt,
                                 m.deliveryReceiptRequested ? 1 : 0, m.payload])
        case .removeMessage(let token, let id):
            try db.execute(sql: "DELETE FROM queued_message WHERE token = ? AND device_message_id = ?",
                           arguments: [token, id])
        case .removeAllMessages(let token):
            try db.execute(sql: "DELETE FROM queued_message WHERE token = ?", arguments: [token])
        case .setMeta(let key, let value):
            try db.execute(sql: "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", arguments: [key, value])
        }
    }

    // MARK: reads

    public func loadSenders() throws -> [SenderRecord] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT sender_id, server_key, created_at FROM sender").map {
                SenderRecord(senderID: $0[0], serverKey: $0[1], createdAt: $0[2])
            }
        }
    }

    public func loadDevices() throws -> [DeviceRecord] {
        try pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT token, device_id, secret, app, platform, senders, created_at, status, state FROM device
                """).map { row in
                let senders: String = row[5]
                return DeviceRecord(token: row[0], deviceID: row[1], secret: row[2], app: row[3], platform: row[4],
                                    senders: senders.split(separator: ",").map(String.init),
                                    createdAt: row[6], status: row[7], state: row[8])
            }
        }
    }

    /// The device's queue in arrival order.
    public func queuedMessages(token: String) throws -> [QueuedMessage] {
        try pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT token, device_message_id, sender_id, app_message_id, collapse_key, priority, ttl,
                  enqueued_at, expires_at, receipt, payload
                FROM queued_message WHERE token = ? ORDER BY seq
                """, arguments: [token]).map(Self.message(from:))
        }
    }

    /// Number of queued messages per token.
    public func queueCounts() throws -> [String: Int] {
        try pool.read { db in
            var counts: [String: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT token, COUNT(*) FROM queued_message GROUP BY token") {
                counts[row[0]] = row[1]
            }
            return counts
        }
    }

    public func totalQueued() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM queued_message") ?? 0 }
    }

    public func meta(_ key: String) throws -> String? {
        try pool.read { db in try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key]) }
    }

    private static func message(from row: Row) -> QueuedMessage {
        QueuedMessage(token: row[0], deviceMessageID: row[1], senderID: row[2], appMessageID: row[3],
                      collapseKey: row[4], priority: row[5], timeToLive: row[6], enqueuedAt: row[7],
                      expiresAt: row[8], deliveryReceiptRequested: (row[9] as Int) != 0, payload: row[10])
    }
}
