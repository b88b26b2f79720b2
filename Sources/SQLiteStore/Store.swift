import Foundation
import GRDB
import Locking
import PushDomain
import StoreModel
import Synchronization

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

    let pool: DatabasePool
    public let path: String

    public init(path: String, durability: Durability = .full) throws {
        self.path = path
        var config = Configuration()
        config.busyMode = .timeout(5)
        let sync = durability == .full ? "FULL" : "NORMAL"
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(sync)")
        }
        do {
            pool = try DatabasePool(path: path, configuration: config)
            try Self.migrator.migrate(pool)
        } catch let error as DatabaseError where [.SQLITE_NOTADB, .SQLITE_CORRUPT].contains(error.resultCode) {
            throw UnreadableDatabase(path: path, reason: error.message ?? "\(error.resultCode)")
        }
    }

    /// The newest migration's name: what an export names as its schema (docs/export-format.md).
    public static let newestMigration = StoreSchema.newest

    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        registerFirstSchema(&m)
        registerV2ToV7(&m)
        registerV8(&m)
        registerV9On(&m)
        return m
    }

    // MARK: fault injection

    /// Ops for which `apply` throws `InjectedStoreFailure` (nil: none). For tests and fault injection:
    /// a full disk or an I/O error is otherwise hard to bring about on purpose.
    private let failing = Locked<FailurePredicate?>(nil)

    /// Told, after each commit, which queued messages its statements removed (collapse, the limits,
    /// expiry); nil (the default) costs nothing.
    private let removalObserver = Locked<RemovalObserver?>(nil)

    /// In structs, not bare function types, behind the locks: read back through `withLock`'s inout, a
    /// bare function gains two reabstraction thunks per read, a chain that grew by every commit
    /// (GroupCommitter's `BatchObserver` says more).
    private struct FailurePredicate: Sendable {
        let call: @Sendable (StoreOp) -> Bool
    }

    private struct RemovalObserver: Sendable {
        let call: @Sendable ([QueueRemoval]) -> Void
    }

    public func observeRemovals(_ observer: (@Sendable ([QueueRemoval]) -> Void)?) {
        removalObserver.withLock { $0 = observer.map(RemovalObserver.init(call:)) }
    }

    public func injectFailures(_ predicate: (@Sendable (StoreOp) -> Bool)?) {
        failing.withLock { $0 = predicate.map(FailurePredicate.init(call:)) }
    }

    /// While true, every read throws `InjectedStoreFailure`.
    private let failingReads = Atomic<Bool>(false)

    public func injectReadFailures(_ on: Bool) {
        failingReads.store(on, ordering: .relaxed)
    }

    private func read<T>(_ body: (Database) throws -> T) throws -> T {
        if failingReads.load(ordering: .relaxed) { throw InjectedStoreFailure() }
        return try pool.read(body)
    }

    // MARK: writes

    /// Applies every op in one transaction: all or nothing.
    public func apply(_ ops: [StoreOp]) throws {
        let failing = self.failing.withLock { $0 }?.call
        let observer = removalObserver.withLock { $0 }?.call
        let removals = observer == nil ? nil : QueueRemovals()
        try pool.write { db in
            for op in ops { try Self.apply(op, in: db, failing: failing, removals: removals) }
        }
        if let observer, let removals, !removals.items.isEmpty { observer(removals.items) }
    }

    /// Applies each item (a caller's ops) all or nothing, in one transaction: an item that fails is
    /// rolled back to its savepoint and reported, the others commit. The result holds one entry per
    /// item, nil for those committed. Throws only when the transaction as a whole fails.
    public func applyIsolated(_ items: [[StoreOp]]) throws -> [Error?] {
        let failing = self.failing.withLock { $0 }?.call
        let observer = removalObserver.withLock { $0 }?.call
        let removals = observer == nil ? nil : QueueRemovals()
        var results = [Error?](repeating: nil, count: items.count)
        try pool.writeWithoutTransaction { db in
            try db.inTransaction {
                for (index, ops) in items.enumerated() {
                    let mark = removals?.items.count ?? 0
                    try db.execute(sql: "SAVEPOINT item")
                    do {
                        for op in ops { try Self.apply(op, in: db, failing: failing, removals: removals) }
                        try db.execute(sql: "RELEASE SAVEPOINT item")
                    } catch {
                        results[index] = error
                        removals?.items.removeSubrange(mark...)
                        try db.execute(sql: "ROLLBACK TO SAVEPOINT item")
                        try db.execute(sql: "RELEASE SAVEPOINT item")
                    }
                }
                return .commit
            }
        }
        if let observer, let removals, !removals.items.isEmpty { observer(removals.items) }
        return results
    }

    private static func apply(_ op: StoreOp, in db: Database, failing: (@Sendable (StoreOp) -> Bool)?,
                              removals: QueueRemovals?) throws {
        if let failing, failing(op) { throw InjectedStoreFailure() }
        switch op {
        case .upsertSender(let s):
            try db.cachedStatement(sql: """
                INSERT INTO sender(sender_id, server_key, created_at) VALUES (?, ?, ?)
                ON CONFLICT(sender_id) DO UPDATE SET server_key = excluded.server_key
                """).execute(arguments: [s.senderID, s.serverKey, s.createdAt])
        case .upsertDevice(let d):
            try upsertDevice(d, in: db)
        case .enqueue(let m, let limits):
            try enqueue(m, limits: limits, in: db, removals: removals)
        case .removeMessage(let token, let id):
            try db.cachedStatement(sql: "DELETE FROM queued_message WHERE device_key = (SELECT device_key FROM device WHERE token = ?) AND device_message_id = ?").execute(arguments: [token, id])
        case .removeAllMessages(let token):
            try db.cachedStatement(sql: "DELETE FROM queued_message WHERE device_key = (SELECT device_key FROM device WHERE token = ?)").execute(arguments: [token])
        case .collapse(let token, let key):
            // A device unknown to the store has nothing stored to collapse.
            if let device = try registeredDeviceKey(token: token, in: db) {
                try collapse(device: device, key: key, in: db, removals: removals)
            }
        case .removeExpired(let now):
            try deleteMessages(sql: "DELETE FROM queued_message WHERE expires_at <= ?", arguments: [now],
                               as: .expired, in: db, removals: removals)
            try db.cachedStatement(sql: "DELETE FROM message_body WHERE expires_at <= ?").execute(arguments: [now])
        case .addOutbound(let o):
            let insert = try RawStatement(db, sql: """
                INSERT OR REPLACE INTO outbound(sender_id, kind, message_id, token, json, created_at, expires_at, about_message_id)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """)
            insert.bind(1, o.senderID); insert.bind(2, o.kind.rawValue); insert.bind(3, o.messageID); insert.bind(4, o.token)
            insert.bind(5, o.json); insert.bind(6, o.createdAt); insert.bind(7, o.expiresAt); insert.bind(8, o.aboutMessageID)
            try insert.execute()
        case .removeOutbound(let sender, let kind, let token, let id):
            let delete = try RawStatement(db, sql: "DELETE FROM outbound WHERE sender_id = ? AND kind = ? AND token = ? AND message_id = ?")
            delete.bind(1, sender); delete.bind(2, kind.rawValue); delete.bind(3, token); delete.bind(4, id)
            try delete.execute()
        case .addToTray(let t):
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO tray(token, device_message_id, payload, shown_at, view) VALUES (?, ?, ?, ?, ?)").execute(arguments: [t.token, t.deviceMessageID, t.payload, t.shownAt, t.view])
        case .removeFromTray(let token, let id):
            try db.cachedStatement(sql: "DELETE FROM tray WHERE token = ? AND device_message_id = ?").execute(arguments: [token, id])
        case .clearTray(let token):
            try db.cachedStatement(sql: "DELETE FROM tray WHERE token = ?").execute(arguments: [token])
        case .upsertDeviceGroup(let g):
            let members = JSONValue.array(g.members.map(JSONValue.string)).encoded()
            try db.cachedStatement(sql: """
                INSERT INTO device_group(id, sender_id, name, members, created_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET name = excluded.name, members = excluded.members
                """).execute(arguments: [g.id, g.senderID, g.name, members, g.createdAt])
        case .removeDeviceGroup(let id):
            try db.cachedStatement(sql: "DELETE FROM device_group WHERE id = ?").execute(arguments: [id])
        case .removeSenderData(let sender):
            try removeSenderData(sender, in: db)
        case .removeAllDevices:
            try removeAllDevices(in: db)
        case .setMeta(let key, let value):
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)").execute(arguments: [key, value])
        case .subscribe(let subscriptions):
            let insert = try db.cachedStatement(sql: """
                INSERT OR IGNORE INTO topic_subscription(sender_id, topic, device_key, added_at)
                SELECT ?, ?, device_key, ? FROM device WHERE token = ?
                """)
            for t in subscriptions { try insert.execute(arguments: [t.senderID, t.topic, t.addedAt, t.token]) }
        case .unsubscribe(let sender, let topic, let tokens):
            let delete = try db.cachedStatement(sql: "DELETE FROM topic_subscription WHERE sender_id = ? AND topic = ? AND device_key = (SELECT device_key FROM device WHERE token = ?)")
            for token in tokens { try delete.execute(arguments: [sender, topic, token]) }
        case .removeSubscriptions(let token):
            try db.cachedStatement(sql: "DELETE FROM topic_subscription WHERE device_key = (SELECT device_key FROM device WHERE token = ?)").execute(arguments: [token])
        case .fanOut(let fanOut):
            try Self.fanOut(fanOut, in: db, removals: removals)
        case .addAPNsFeedback(let f):
            try db.cachedStatement(sql: """
                INSERT INTO apns_feedback(bundle_id, device_token, timestamp) VALUES (?, ?, ?)
                ON CONFLICT(bundle_id, device_token) DO UPDATE SET timestamp = excluded.timestamp
                """).execute(arguments: [f.bundleID, f.deviceToken, f.timestamp])
        case .removeAPNsFeedback(let read):
            let delete = try db.cachedStatement(sql: """
                DELETE FROM apns_feedback WHERE bundle_id = ? AND device_token = ? AND timestamp <= ?
                """)
            for f in read { try delete.execute(arguments: [f.bundleID, f.deviceToken, f.timestamp]) }
        case .removeAPNsFeedbackToken(let bundleID, let token):
            try db.cachedStatement(sql: "DELETE FROM apns_feedback WHERE bundle_id = ? AND device_token = ?")
                .execute(arguments: [bundleID, token])
        }
    }

    private static func upsertDevice(_ d: DeviceRecord, in db: Database) throws {
        try db.cachedStatement(sql: """
            INSERT INTO device(token, device_id, secret, app, platform, senders, created_at, status, state, replaced_by,
              web_subscription, apns_token, refreshed_tokens, device_key)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, (SELECT IFNULL(MAX(device_key), 0) + 1 FROM device))
            ON CONFLICT(token) DO UPDATE SET secret = excluded.secret, app = excluded.app,
              platform = excluded.platform, senders = excluded.senders, status = excluded.status,
              state = excluded.state, replaced_by = excluded.replaced_by, web_subscription = excluded.web_subscription,
              apns_token = excluded.apns_token, refreshed_tokens = excluded.refreshed_tokens
            """).execute(arguments: [d.token, d.deviceID, d.secret, d.app, d.platform.rawValue,
                             d.senders.joined(separator: ","), d.createdAt, d.status.rawValue, d.state, d.replacedBy,
                             d.webSubscription?.storedJSON.encoded(), d.apnsToken,
                             d.refreshedTokens.isEmpty ? nil : d.refreshedTokens.joined(separator: ",")])
    }

    /// A sender's queued messages, outbound items, subscriptions and groups, and the devices
    /// registered to it alone with everything of theirs.
    private static func removeSenderData(_ sender: String, in db: Database) throws {
        for sql in ["DELETE FROM queued_message WHERE sender_id = ?", "DELETE FROM outbound WHERE sender_id = ?",
                    "DELETE FROM topic_subscription WHERE sender_id = ?", "DELETE FROM device_group WHERE sender_id = ?",
                    "DELETE FROM tray WHERE token IN (SELECT token FROM device WHERE senders = ?)",
                    "DELETE FROM queued_message WHERE device_key IN (SELECT device_key FROM device WHERE senders = ?)",
                    "DELETE FROM topic_subscription WHERE device_key IN (SELECT device_key FROM device WHERE senders = ?)",
                    "DELETE FROM device WHERE senders = ?"] {
            try db.cachedStatement(sql: sql).execute(arguments: [sender])
        }
    }

    /// Every device and all that hangs off them (senders and meta stay).
    private static func removeAllDevices(in db: Database) throws {
        for table in ["device", "queued_message", "outbound", "tray", "topic_subscription", "message_body", "device_group",
                      "apns_feedback"] {
            try db.execute(sql: "DELETE FROM \(table)")
        }
    }

    /// The device's number in the queue and subscription tables (see migration v8).
    static func deviceKey(token: String, in db: Database) throws -> Int64 {
        guard let key = try registeredDeviceKey(token: token, in: db) else {
            // A message for a token that is not registered is a caller's mistake: it rolls back
            // its transaction or savepoint.
            throw UnknownDevice(token: token)
        }
        return key
    }

    private static func registeredDeviceKey(token: String, in db: Database) throws -> Int64? {
        let select = try RawStatement(db, sql: "SELECT device_key FROM device WHERE token = ?")
        select.bind(1, token)
        return try select.int64()
    }

    /// Drops the device's stored messages with this collapse key (a newer one replaces them).
    static func collapse(device: Int64, key: String, in db: Database, removals: QueueRemovals?) throws {
        try deleteMessages(sql: "DELETE FROM queued_message WHERE device_key = ? AND collapse_key = ? AND kind IN ('message', 'apns')",
                           arguments: [device, key], as: .collapsed, in: db, removals: removals)
    }

    /// Runs a DELETE on the queue; with `removals`, also notes which messages of which devices went
    /// and why (for the journal: collapsed, discarded by the limit, expired). The service's own
    /// notices are not noted.
    static func deleteMessages(sql: String, arguments: StatementArguments, as reason: QueueRemoval.Reason,
                               in db: Database, removals: QueueRemovals?) throws {
        guard let removals else { return try db.cachedStatement(sql: sql).execute(arguments: arguments) }
        let rows = try Row.fetchAll(db.cachedStatement(sql: sql + """
             RETURNING device_message_id, (SELECT token FROM device d WHERE d.device_key = queued_message.device_key), kind, sender_id
            """), arguments: arguments)
        for row in rows {
            let kind = MessageKind(rawValue: row[2]) ?? .message
            guard kind == .message || kind == .apnsNotification else { continue }
            removals.items.append(QueueRemoval(token: row[1] ?? "", deviceMessageID: row[0], reason: reason, senderID: row[3]))
        }
    }

    /// Stores one message for its device (`m.token` is not read: `device` names it). A message whose id
    /// the device already holds is refused (a constraint error), never put in the other's place: the
    /// other one's sender was ACKed for it (issue 39). The store's own notices (`deleted:…`,
    /// `send_error:…`) are the same fact again when their id repeats, and replace it.
    static func insert(_ m: QueuedMessage, device: Int64, in db: Database) throws {
        let verb = m.kind.isMintedMessage ? "INSERT" : "INSERT OR REPLACE"
        let insert = try RawStatement(db, sql: """
            \(verb) INTO queued_message(device_key, device_message_id, sender_id, app_message_id,
              collapse_key, priority, ttl, enqueued_at, expires_at, receipt, delay_while_idle, notification, kind, payload,
              platform_blocks)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        insert.bind(1, device); insert.bind(2, m.deviceMessageID); insert.bind(3, m.senderID)
        insert.bind(4, m.appMessageID); insert.bind(5, m.collapseKey); insert.bind(6, m.priority)
        insert.bind(7, m.timeToLive); insert.bind(8, m.enqueuedAt); insert.bind(9, m.expiresAt)
        insert.bind(10, m.deliveryReceiptRequested); insert.bind(11, m.delayWhileIdle); insert.bind(12, m.isNotification)
        insert.bind(13, m.kind.rawValue); insert.bind(14, m.payload); insert.bind(15, m.platformBlocks)
        try insert.execute()
    }

    /// FCM's limits when one device already holds `maxNonCollapsible` messages without a key: they
    /// all go, and the deleted-messages notice takes their place (once).
    static func overflow(device: Int64, notice: QueuedMessage, in db: Database, removals: QueueRemovals?) throws {
        try deleteMessages(sql: "DELETE FROM queued_message WHERE device_key = ? AND collapse_key IS NULL AND kind = 'message'",
                           arguments: [device], as: .discarded, in: db, removals: removals)
        let notices = try Int.fetchOne(db.cachedStatement(sql: """
            SELECT COUNT(*) FROM queued_message WHERE device_key = ? AND kind = 'deleted_messages'
            """), arguments: [device]) ?? 0
        if notices == 0 { try insert(notice, device: device, in: db) }
    }

    private static func enqueue(_ m: QueuedMessage, limits: QueueLimits?, in db: Database, removals: QueueRemovals?) throws {
        let device = try deviceKey(token: m.token, in: db)
        if let key = m.collapseKey { try collapse(device: device, key: key, in: db, removals: removals) }
        guard let limits else { return try insert(m, device: device, in: db) }
        if m.collapseKey == nil {
            let count = try RawStatement(db, sql: """
                SELECT COUNT(*) FROM queued_message WHERE device_key = ? AND collapse_key IS NULL AND kind = 'message'
                """)
            count.bind(1, device)
            let stored = try count.int64() ?? 0
            if stored >= limits.maxNonCollapsible {
                // The new message goes with the stored ones (the device gets the notice instead).
                removals?.items.append(QueueRemoval(token: m.token, deviceMessageID: m.deviceMessageID, reason: .discarded,
                                                    senderID: m.senderID, onArrival: true))
                return try overflow(device: device, notice: limits.overflowNotice, in: db, removals: removals)
            }
            return try insert(m, device: device, in: db)
        }
        try insert(m, device: device, in: db)
        try trimCollapseKeys(device: device, keeping: limits.maxCollapseKeys, in: db, removals: removals)
    }

    /// FCM keeps at most `keeping` collapse keys per device: the oldest keys' messages go.
    static func trimCollapseKeys(device: Int64, keeping: Int, in db: Database, removals: QueueRemovals?) throws {
        let keys = try String.fetchAll(db.cachedStatement(sql: """
            SELECT collapse_key FROM queued_message WHERE device_key = ? AND collapse_key IS NOT NULL AND kind IN ('message', 'apns')
            GROUP BY collapse_key ORDER BY MIN(seq)
            """), arguments: [device])
        for key in keys.dropLast(keeping) { try collapse(device: device, key: key, in: db, removals: removals) }
    }

    // MARK: reads

    public func loadSenders() throws -> [SenderRecord] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT sender_id, server_key, created_at FROM sender").map {
                SenderRecord(senderID: $0[0], serverKey: $0[1], createdAt: $0[2])
            }
        }
    }

    public func loadDevices() throws -> [DeviceRecord] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.deviceColumns) FROM device ORDER BY created_at, token").map(Self.device(from:))
        }
    }

    public func device(token: String) throws -> DeviceRecord? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.deviceColumns) FROM device WHERE token = ?", arguments: [token])
                .map(Self.device(from:))
        }
    }

    static let deviceColumns = """
        token, device_id, secret, app, platform, senders, created_at, status, state, replaced_by, web_subscription, apns_token,
        refreshed_tokens
        """

    private static func device(from row: Row) -> DeviceRecord {
        let senders: String = row[5]
        let subscription: String? = row[10]
        let refreshed: String? = row[12]
        return DeviceRecord(token: row[0], deviceID: row[1], secret: row[2], app: row[3],
                            platform: Platform(rawValue: row[4]) ?? .android,
                            senders: senders.split(separator: ",").map(String.init),
                            createdAt: row[6], status: DeviceStatus(rawValue: row[7]) ?? .uninstalled,
                            state: row[8], replacedBy: row[9],
                            webSubscription: subscription.flatMap { try? JSONValue.parse($0) }
                                .flatMap { try? WebPushSubscription.parse($0).get() },
                            apnsToken: row[11], refreshedTokens: refreshed.map { $0.split(separator: ",").map(String.init) } ?? [])
    }

    public func sender(id: String) throws -> SenderRecord? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT sender_id, server_key, created_at FROM sender WHERE sender_id = ?", arguments: [id])
                .map { SenderRecord(senderID: $0[0], serverKey: $0[1], createdAt: $0[2]) }
        }
    }

    public func deviceGroup(id: String) throws -> DeviceGroupRecord? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT id, sender_id, name, members, created_at FROM device_group WHERE id = ?",
                             arguments: [id]).map(Self.group(from:))
        }
    }

    public func subscriptions(token: String) throws -> [TopicSubscription] {
        try read { db in
            try Row.fetchAll(db, sql: """
                SELECT s.sender_id, s.topic, d.token, s.added_at FROM topic_subscription s JOIN device d ON d.device_key = s.device_key
                WHERE d.token = ?
                """, arguments: [token]).map {
                TopicSubscription(senderID: $0[0], topic: $0[1], token: $0[2], addedAt: $0[3])
            }
        }
    }

    public func loadDeviceGroups() throws -> [DeviceGroupRecord] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT id, sender_id, name, members, created_at FROM device_group ORDER BY created_at, id")
                .map(Self.group(from:))
        }
    }

    private static func group(from row: Row) -> DeviceGroupRecord {
        let text: String = row[3]
        let members = ((try? JSONValue.parse(text))?.arrayValue ?? []).compactMap(\.stringValue)
        return DeviceGroupRecord(id: row[0], senderID: row[1], name: row[2], members: members, createdAt: row[4])
    }

    /// The device's queue in arrival order.
    public func queuedMessages(token: String) throws -> [QueuedMessage] {
        try read { db in
            try Row.fetchAll(db, sql: """
                SELECT d.token, q.device_message_id, q.sender_id, q.app_message_id, q.collapse_key, q.priority, q.ttl,
                  q.enqueued_at, q.expires_at, q.receipt, q.delay_while_idle, q.notification, q.kind,
                  COALESCE(b.payload, q.payload), COALESCE(b.platform_blocks, q.platform_blocks)
                FROM device d JOIN queued_message q ON q.device_key = d.device_key
                  LEFT JOIN message_body b ON b.id = q.body_id
                WHERE d.token = ? ORDER BY q.seq
                """, arguments: [token]).map(Self.message(from:))
        }
    }

    /// Number of queued messages per token.
    public func queueCounts() throws -> [String: Int] {
        try read { db in
            var counts: [String: Int] = [:]
            for row in try Row.fetchAll(db, sql: """
                SELECT d.token, q.n FROM (SELECT device_key, COUNT(*) AS n FROM queued_message GROUP BY device_key) q
                JOIN device d ON d.device_key = q.device_key
                """) {
                counts[row[0]] = row[1]
            }
            return counts
        }
    }

    /// The largest microsecond stamp in any stored device message id (`0:<micros>%…`), so that ids
    /// made after a restart never repeat one still queued or in a tray (the virtual clock may stand still).
    public func largestMessageMicros() throws -> Int64 {
        try read { db in
            let sql = """
                SELECT MAX(CAST(substr(id, 3, instr(id, '%') - 3) AS INTEGER)) FROM (
                  SELECT device_message_id AS id FROM queued_message UNION ALL SELECT device_message_id FROM tray
                ) WHERE id LIKE '0:%\\%%' ESCAPE '\\'
                """
            return try Int64.fetchOne(db, sql: sql) ?? 0
        }
    }

    /// Every topic subscription, for the engine's registry at start.
    public func loadSubscriptions() throws -> [TopicSubscription] {
        try read { db in
            try Row.fetchAll(db, sql: """
                SELECT s.sender_id, s.topic, d.token, s.added_at FROM topic_subscription s JOIN device d ON d.device_key = s.device_key
                """).map {
                TopicSubscription(senderID: $0[0], topic: $0[1], token: $0[2], addedAt: $0[3])
            }
        }
    }

    /// The feedback tuples of one app (bundle id), oldest first.
    public func apnsFeedback(bundleID: String) throws -> [APNsFeedbackRecord] {
        try read { db in
            try Row.fetchAll(db, sql: """
                SELECT bundle_id, device_token, timestamp FROM apns_feedback WHERE bundle_id = ? ORDER BY timestamp, device_token
                """, arguments: [bundleID]).map {
                APNsFeedbackRecord(bundleID: $0[0], deviceToken: $0[1], timestamp: $0[2])
            }
        }
    }

    public func meta(_ key: String) throws -> String? {
        try read { db in try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key]) }
    }

    private static func message(from row: Row) -> QueuedMessage {
        QueuedMessage(token: row[0], deviceMessageID: row[1], senderID: row[2], appMessageID: row[3],
                      collapseKey: row[4], priority: row[5], timeToLive: row[6], enqueuedAt: row[7],
                      expiresAt: row[8], deliveryReceiptRequested: (row[9] as Int) != 0,
                      delayWhileIdle: (row[10] as Int) != 0, isNotification: (row[11] as Int) != 0,
                      kind: MessageKind(rawValue: row[12]) ?? .message, payload: row[13], platformBlocks: row[14])
    }

    /// Every message waiting for an app server, oldest first.
    public func loadOutbound() throws -> [OutboundRecord] {
        try read { db in
            try Row.fetchAll(db, sql: """
                SELECT sender_id, kind, message_id, token, json, created_at, expires_at, about_message_id FROM outbound ORDER BY seq
                """).map {
                OutboundRecord(senderID: $0[0], kind: OutboundKind(rawValue: $0[1]) ?? .upstream, messageID: $0[2], token: $0[3], json: $0[4],
                               createdAt: $0[5], expiresAt: $0[6], aboutMessageID: $0[7])
            }
        }
    }

    public func tray(token: String) throws -> [TrayEntry] {
        try read { db in
            try Row.fetchAll(db, sql: """
                SELECT token, device_message_id, payload, shown_at, view FROM tray WHERE token = ? ORDER BY shown_at, rowid
                """, arguments: [token]).map {
                TrayEntry(token: $0[0], deviceMessageID: $0[1], payload: $0[2], shownAt: $0[3], view: $0[4])
            }
        }
    }
}

/// The database file is not one SQLite can read: the emulator refuses to start rather than run on it
/// (docs/hardening.md, "Storage faults").
public struct UnreadableDatabase: Error, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var description: String {
        "the database \(path) is corrupt or not a ccs-emulator database (SQLite: \(reason)); move it away to keep it, or start with --reset-state to begin with an empty one"
    }
}

extension MessageKind {
    /// An app server's message (FCM or APNs) under an id a node minted: another message with its id
    /// is another message, refused rather than put in its place (`Store.insert`).
    var isMintedMessage: Bool { self == .message || self == .apnsNotification }
}

extension Store: Persistence {}

/// What one transaction removed, gathered while it runs (on the writer's thread only).
final class QueueRemovals {
    var items: [QueueRemoval] = []
}
