import StoreModel
import Locking
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import PushDomain
import Synchronization

/// Durable state in PostgreSQL: the `Persistence` backend for several nodes on one database
/// (docs/scaling.md). The same tables as the SQLite backend (`PostgresSchema`), and the same rules:
/// every batch is one transaction, committed before its completions run; FCM's per-device queue
/// rules run inside the transaction of the write that triggers them.
///
/// Two connections: one for writes (only the group committer's thread writes), one for reads.
/// Both block the calling thread until PostgreSQL answers, as SQLite's calls do.
public final class PostgresStore: Persistence {
    public let url: PostgresURL
    /// This node's id (16 lower-case hex digits, new each run): it owns the upstream messages and
    /// receipts it writes, and other nodes ignore the registry changes it announces.
    public let nodeID: String
    let group: MultiThreadedEventLoopGroup
    let writer: BlockingConnection
    let reader: BlockingConnection

    /// Opens both connections and applies the migrations not applied yet. `synchronousCommit: false`
    /// is `--durability normal`: a commit survives the emulator's crash (it is in PostgreSQL's
    /// memory) but not PostgreSQL's.
    public init(url: PostgresURL, synchronousCommit: Bool = true, logger: Logger = Logger(label: "ccs-emulator.postgres")) throws {
        self.url = url
        nodeID = String(UInt64.random(in: 1 ... .max), radix: 16).leftPadded(to: 16)
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let setup = ["SET synchronous_commit = \(synchronousCommit ? "on" : "off")", "SET TIME ZONE 'UTC'"]
        writer = BlockingConnection(url: url, eventLoop: group.next(), setup: setup, logger: logger)
        reader = BlockingConnection(url: url, eventLoop: group.next(), setup: setup, logger: logger)
        do {
            try migrate()
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    private let closed = Atomic<Bool>(false)

    /// Closes both connections and stops their event loop (once). Calls after it fail.
    public func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        writer.close()
        reader.close()
        try? group.syncShutdownGracefully()
    }

    /// Creates an empty database on the server `server` names (its own database is only where the
    /// statement runs): for tests and `scripts/cluster`, which give each run a database of its own.
    public static func createDatabase(named name: String, server: PostgresURL) throws {
        guard name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
            throw PostgresURL.Invalid(description: "database name \(name): letters, digits and _ only")
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let connection = BlockingConnection(url: server, eventLoop: group.next(), setup: [],
                                            logger: Logger(label: "ccs-emulator.postgres"))
        defer { connection.close() }
        _ = try connection.withSession { try $0.execute("CREATE DATABASE \(name)") }
    }

    /// Deletes every row of the state (`serve --reset-state`): senders, devices, queues, meta. Every
    /// node on this database sees an empty state after its next restart.
    public func removeEverything() throws {
        try inTransaction { s in
            for table in StoreSnapshot.tables.reversed() { try s.execute("DELETE FROM \(table)") }
        }
    }

    /// Applies the migrations not applied yet, in one transaction under an advisory lock: two nodes
    /// starting on one empty database apply each migration once.
    private func migrate() throws {
        try writer.transaction { s in
            // Negative: device keys (the per-device advisory locks) are positive.
            try s.execute("SELECT pg_advisory_xact_lock(-7305421)")
            try s.execute("CREATE TABLE IF NOT EXISTS ccs_schema_migration (version BIGINT PRIMARY KEY NOT NULL)")
            let applied = try s.rows("SELECT COALESCE(MAX(version), 0) FROM ccs_schema_migration")
                .first.map { try $0.makeRandomAccess()[0].decode(Int.self) } ?? 0
            for (index, migration) in PostgresSchema.migrations.enumerated() where index + 1 > applied {
                switch migration {
                case .script(let sql): try s.script(sql)
                case .statement(let sql): try s.execute(sql)
                }
                try s.execute("INSERT INTO ccs_schema_migration(version) VALUES ($1)", binds(index + 1))
            }
        }
    }

    // MARK: fault injection

    private struct FailurePredicate: Sendable {
        let call: @Sendable (StoreOp) -> Bool
    }

    private struct RemovalObserver: Sendable {
        let call: @Sendable ([QueueRemoval]) -> Void
    }

    private let failing = Locked<FailurePredicate?>(nil)
    private let removalObserver = Locked<RemovalObserver?>(nil)
    private let failingReads = Atomic<Bool>(false)

    public func observeRemovals(_ observer: (@Sendable ([QueueRemoval]) -> Void)?) {
        removalObserver.withLock { $0 = observer.map(RemovalObserver.init(call:)) }
    }

    public func injectFailures(_ predicate: (@Sendable (StoreOp) -> Bool)?) {
        failing.withLock { $0 = predicate.map(FailurePredicate.init(call:)) }
    }

    public func injectReadFailures(_ on: Bool) {
        failingReads.store(on, ordering: .relaxed)
    }

    func read<T>(_ body: (BlockingConnection.Session) throws -> T) throws -> T {
        if failingReads.load(ordering: .relaxed) { throw InjectedStoreFailure() }
        return try reader.withSession(body)
    }

    // MARK: writes

    public func apply(_ ops: [StoreOp]) throws {
        let failing = self.failing.withLock { $0 }?.call
        let observer = removalObserver.withLock { $0 }?.call
        let removals: RemovalList? = observer == nil ? nil : RemovalList()
        do {
            try inTransaction { s in
                removals?.items = []
                // Consecutive enqueues go as one statement (`ccs_enqueue_many`), and consecutive removals
                // of delivered messages as another, each in its place: a batch costs a few round trips.
                var enqueues: [(QueuedMessage, QueueLimits?)] = []
                var delivered: [(token: String, id: String)] = []
                func flushRuns() {
                    Self.enqueue(enqueues, in: s, node: nodeID, removals: removals)
                    Self.removeMessages(delivered, in: s)
                    enqueues = []
                    delivered = []
                }
                for op in ops {
                    if let failing, failing(op) { throw InjectedStoreFailure() }
                    switch op {
                    case .enqueue(let m, let limits):
                        if !delivered.isEmpty { flushRuns() }
                        enqueues.append((m, limits))
                    case .removeMessage(let token, let id):
                        if !enqueues.isEmpty { flushRuns() }
                        delivered.append((token, id))
                    default:
                        flushRuns()
                        try Self.apply(op, in: s, node: nodeID, failing: nil, removals: removals)
                    }
                }
                flushRuns()
            }
        } catch {
            throw Self.domainError(error)
        }
        if let observer, let removals, !removals.items.isEmpty { observer(removals.items) }
    }

    public func applyIsolated(_ items: [[StoreOp]]) throws -> [Error?] {
        let failing = self.failing.withLock { $0 }?.call
        let observer = removalObserver.withLock { $0 }?.call
        let removals: RemovalList? = observer == nil ? nil : RemovalList()
        var results = [Error?](repeating: nil, count: items.count)
        try inTransaction { s in
            removals?.items = []
            results = [Error?](repeating: nil, count: items.count)
            for (index, ops) in items.enumerated() {
                let mark = removals?.items.count ?? 0
                try s.execute("SAVEPOINT item")
                do {
                    for op in ops { try Self.apply(op, in: s, node: nodeID, failing: failing, removals: removals) }
                    try s.execute("RELEASE SAVEPOINT item")
                } catch let error where !s.connection.isClosed && !Self.mustRetry(error) {
                    results[index] = Self.domainError(error)
                    removals?.items.removeSubrange(mark...)
                    try s.execute("ROLLBACK TO SAVEPOINT item")
                    try s.execute("RELEASE SAVEPOINT item")
                }
            }
        }
        if let observer, let removals, !removals.items.isEmpty { observer(removals.items) }
        return results
    }

    /// Runs `body` in one transaction on the writer and commits it. A deadlock or serialization
    /// failure (two nodes writing one device's queue in opposite orders) is PostgreSQL rolling the
    /// whole transaction back: it runs again, up to three times.
    private func inTransaction(_ body: (BlockingConnection.Session) throws -> Void) throws {
        var attempt = 0
        while true {
            attempt += 1
            do {
                try writer.transaction(body)
                return
            } catch let error where Self.mustRetry(error) && attempt < 3 {
                continue
            }
        }
    }

    /// SQLSTATE 40001 (serialization failure) and 40P01 (deadlock detected): the transaction was
    /// rolled back whole and may simply run again.
    static func mustRetry(_ error: any Error) -> Bool {
        guard let state = (error as? PostgresFailure)?.sqlState else { return false }
        return state == "40001" || state == "40P01"
    }

    /// A failure in the store's own terms: `ccs_enqueue`'s "no device" is `UnknownDevice`.
    static func domainError(_ error: any Error) -> any Error {
        guard let failure = error as? PostgresFailure, failure.sqlState == "P0002" else { return error }
        let prefix = "no device with token "
        let token = failure.message.hasPrefix(prefix) ? String(failure.message.dropFirst(prefix.count)) : failure.message
        return UnknownDevice(token: token)
    }

    static func apply(_ op: StoreOp, in s: BlockingConnection.Session, node: String, failing: (@Sendable (StoreOp) -> Bool)?,
                      removals: RemovalList?) throws {
        if let failing, failing(op) { throw InjectedStoreFailure() }
        try write(op, in: s, node: node, removals: removals)
        try announce(op, in: s, node: node)
    }

    private static func write(_ op: StoreOp, in s: BlockingConnection.Session, node: String,
                              removals: RemovalList?) throws {
        switch op {
        case .upsertSender(let r):
            s.send("""
                INSERT INTO sender(sender_id, server_key, created_at) VALUES ($1, $2, $3)
                ON CONFLICT(sender_id) DO UPDATE SET server_key = EXCLUDED.server_key
                """, binds(r.senderID, r.serverKey, r.createdAt))
        case .upsertDevice(let d):
            upsertDevice(d, in: s)
        case .enqueue(let m, let limits):
            enqueue(m, limits: limits, in: s, node: node, removals: removals)
        case .removeMessage(let token, let id):
            s.send("""
                DELETE FROM queued_message WHERE device_key = (SELECT device_key FROM device WHERE token = $1)
                  AND device_message_id = $2
                """, binds(token, id))
        case .removeAllMessages(let token):
            s.send("DELETE FROM queued_message WHERE device_key = (SELECT device_key FROM device WHERE token = $1)",
                          binds(token))
        case .collapse(let token, let key):
            // A device unknown to the store has nothing stored to collapse.
            deleteMessages("""
                DELETE FROM queued_message WHERE device_key = (SELECT device_key FROM device WHERE token = $1)
                  AND collapse_key = $2 AND kind IN ('message', 'apns')
                """, binds(token, key), as: .collapsed, in: s, removals: removals)
        case .removeExpired(let now):
            deleteMessages("DELETE FROM queued_message WHERE expires_at <= $1", binds(now), as: .expired,
                           in: s, removals: removals)
            s.send("DELETE FROM message_body WHERE expires_at <= $1", binds(now))
        case .addOutbound(let o):
            s.send("""
                INSERT INTO outbound(sender_id, kind, message_id, token, json, created_at, expires_at, about_message_id, owner)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                ON CONFLICT(sender_id, kind, token, message_id) DO UPDATE SET json = EXCLUDED.json,
                  created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at,
                  about_message_id = EXCLUDED.about_message_id, seq = nextval('outbound_seq_seq'), owner = EXCLUDED.owner
                """, binds(o.senderID, o.kind.rawValue, o.messageID, o.token, o.json, o.createdAt, o.expiresAt,
                           o.aboutMessageID, node))
        case .removeOutbound(let sender, let kind, let token, let id):
            s.send("DELETE FROM outbound WHERE sender_id = $1 AND kind = $2 AND token = $3 AND message_id = $4",
                          binds(sender, kind.rawValue, token, id))
        case .addToTray(let t):
            s.send("""
                INSERT INTO tray(token, device_message_id, payload, shown_at, view) VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT(token, device_message_id) DO UPDATE SET payload = EXCLUDED.payload,
                  shown_at = EXCLUDED.shown_at, view = EXCLUDED.view, seq = nextval('tray_seq_seq')
                """, binds(t.token, t.deviceMessageID, t.payload, t.shownAt, t.view))
        case .removeFromTray(let token, let id):
            s.send("DELETE FROM tray WHERE token = $1 AND device_message_id = $2", binds(token, id))
        case .clearTray(let token):
            s.send("DELETE FROM tray WHERE token = $1", binds(token))
        case .setMeta(let key, let value):
            s.send("""
                INSERT INTO meta(key, value) VALUES ($1, $2) ON CONFLICT(key) DO UPDATE SET value = EXCLUDED.value
                """, binds(key, value))
        case .upsertDeviceGroup(let g):
            let members = JSONValue.array(g.members.map(JSONValue.string)).encoded()
            s.send("""
                INSERT INTO device_group(id, sender_id, name, members, created_at) VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT(id) DO UPDATE SET name = EXCLUDED.name, members = EXCLUDED.members
                """, binds(g.id, g.senderID, g.name, members, g.createdAt))
        case .removeDeviceGroup(let id):
            s.send("DELETE FROM device_group WHERE id = $1", binds(id))
        case .removeAllDevices:
            removeAllDevices(in: s)
        case .removeSenderData(let sender):
            removeSenderData(sender, in: s)
        case .subscribe(let subscriptions):
            for t in subscriptions {
                s.send("""
                    INSERT INTO topic_subscription(sender_id, topic, device_key, added_at)
                    SELECT $1, $2, device_key, $3 FROM device WHERE token = $4 ON CONFLICT DO NOTHING
                    """, binds(t.senderID, t.topic, t.addedAt, t.token))
            }
        case .unsubscribe(let sender, let topic, let tokens):
            s.send("""
                DELETE FROM topic_subscription WHERE sender_id = $1 AND topic = $2
                  AND device_key IN (SELECT device_key FROM device WHERE token = ANY($3))
                """, binds(sender, topic, tokens))
        case .removeSubscriptions(let token):
            s.send("DELETE FROM topic_subscription WHERE device_key = (SELECT device_key FROM device WHERE token = $1)",
                          binds(token))
        case .fanOut(let fanOut):
            try Self.fanOut(fanOut, in: s, node: node, removals: removals)
        case .addAPNsFeedback, .removeAPNsFeedback, .removeAPNsFeedbackToken:
            writeAPNsFeedback(op, in: s)
        }
    }

    private static func upsertDevice(_ d: DeviceRecord, in s: BlockingConnection.Session) {
        s.send("""
            INSERT INTO device(token, device_id, secret, app, platform, senders, created_at, status, state, replaced_by,
              web_subscription, apns_token, refreshed_tokens)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
            ON CONFLICT(token) DO UPDATE SET secret = EXCLUDED.secret, app = EXCLUDED.app,
              platform = EXCLUDED.platform, senders = EXCLUDED.senders, status = EXCLUDED.status,
              state = EXCLUDED.state, replaced_by = EXCLUDED.replaced_by, web_subscription = EXCLUDED.web_subscription,
              apns_token = EXCLUDED.apns_token, refreshed_tokens = EXCLUDED.refreshed_tokens
            """, binds(d.token, d.deviceID, d.secret, d.app, d.platform.rawValue, d.senders.joined(separator: ","),
                       d.createdAt, d.status.rawValue, d.state, d.replacedBy, d.webSubscription?.storedJSON.encoded(),
                       d.apnsToken, d.refreshedTokens.isEmpty ? nil : d.refreshedTokens.joined(separator: ",")))
    }

    /// Every device and all that hangs off them (senders and meta stay).
    private static func removeAllDevices(in s: BlockingConnection.Session) {
        for table in ["device", "queued_message", "outbound", "tray", "topic_subscription", "message_body",
                      "device_group", "apns_feedback"] {
            s.send("DELETE FROM \(table)")
        }
    }

    /// A sender's queued messages, outbound items, subscriptions and groups, and the devices
    /// registered to it alone with everything of theirs.
    private static func removeSenderData(_ sender: String, in s: BlockingConnection.Session) {
        for sql in ["DELETE FROM queued_message WHERE sender_id = $1", "DELETE FROM outbound WHERE sender_id = $1",
                    "DELETE FROM topic_subscription WHERE sender_id = $1", "DELETE FROM device_group WHERE sender_id = $1",
                    "DELETE FROM tray WHERE token IN (SELECT token FROM device WHERE senders = $1)",
                    "DELETE FROM queued_message WHERE device_key IN (SELECT device_key FROM device WHERE senders = $1)",
                    "DELETE FROM topic_subscription WHERE device_key IN (SELECT device_key FROM device WHERE senders = $1)",
                    "DELETE FROM device WHERE senders = $1"] {
            s.send(sql, binds(sender))
        }
    }

    /// The APNs feedback service's tuples: added (the newest uninstall time kept), read, or dropped.
    private static func writeAPNsFeedback(_ op: StoreOp, in s: BlockingConnection.Session) {
        switch op {
        case .addAPNsFeedback(let f):
            s.send("""
                INSERT INTO apns_feedback(bundle_id, device_token, timestamp) VALUES ($1, $2, $3)
                ON CONFLICT(bundle_id, device_token) DO UPDATE SET timestamp = EXCLUDED.timestamp
                """, binds(f.bundleID, f.deviceToken, f.timestamp))
        case .removeAPNsFeedback(let read):
            for f in read {
                s.send("DELETE FROM apns_feedback WHERE bundle_id = $1 AND device_token = $2 AND timestamp <= $3",
                              binds(f.bundleID, f.deviceToken, f.timestamp))
            }
        case .removeAPNsFeedbackToken(let bundleID, let token):
            s.send("DELETE FROM apns_feedback WHERE bundle_id = $1 AND device_token = $2", binds(bundleID, token))
        default:  // only the three feedback ops come here (write)
            break
        }
    }

    /// What the other nodes are told of a write, sent by PostgreSQL only if the transaction commits
    /// (NOTIFY is transactional): a device's new messages to the node it is connected to, and
    /// changes to state every node keeps in memory to all (docs/scaling.md).
    private static func announce(_ op: StoreOp, in s: BlockingConnection.Session, node: String) throws {
        func registry(_ kind: String, _ value: String) throws {
            let payload = JSONValue.object(["n": .string(node), "k": .string(kind), "v": .string(value)]).encoded()
            s.send("SELECT pg_notify('\(PostgresCluster.registryChannel)', $1)", binds(payload))
        }
        switch op {
        // An enqueue tells the device's node itself (`ccs_enqueue`).
        case .upsertDevice(let d): try registry("device", d.token)
        case .upsertSender(let r): try registry("sender", r.senderID)
        case .subscribe(let list):
            for token in Set(list.map(\.token)) { try registry("subscriptions", token) }
        case .unsubscribe(_, _, let tokens):
            for token in Set(tokens) { try registry("subscriptions", token) }
        case .removeSubscriptions(let token): try registry("subscriptions", token)
        case .upsertDeviceGroup(let g): try registry("group", g.id)
        case .removeDeviceGroup(let id): try registry("group", id)
        case .removeAllDevices, .removeSenderData: try registry("everything", "")
        case .setMeta(MetaKey.virtualClock, let millis): try registry("clock", millis)
        default: break
        }
    }

    static func collapse(device: Int64, key: String, in s: BlockingConnection.Session, removals: RemovalList?) throws {
        deleteMessages("""
            DELETE FROM queued_message WHERE device_key = $1 AND collapse_key = $2 AND kind IN ('message', 'apns')
            """, binds(device, key), as: .collapsed, in: s, removals: removals)
    }

    /// A DELETE on the queue, sent without waiting; with `removals`, also notes which app messages
    /// went and why (the journal) when its rows come back.
    static func deleteMessages(_ sql: String, _ arguments: PostgresBindings, as reason: QueueRemoval.Reason,
                               in s: BlockingConnection.Session, removals: RemovalList?) {
        guard let removals else { return s.send(sql, arguments) }
        s.send(sql + """
             RETURNING device_message_id, (SELECT token FROM device d WHERE d.device_key = queued_message.device_key), kind, sender_id
            """, arguments) { rows in
            for row in rows {
                let r = row.makeRandomAccess()
                let kind = MessageKind(rawValue: try r[2].decode(String.self)) ?? .message
                guard kind == .message || kind == .apnsNotification else { continue }
                removals.append(QueueRemoval(token: try r[1].decode(String?.self) ?? "", deviceMessageID: try r[0].decode(String.self),
                                             reason: reason, senderID: try r[3].decode(String.self)))
            }
        }
    }

    /// Stores one message for its device; a row with the same id is replaced and goes to the end of
    /// the queue (as SQLite's INSERT OR REPLACE).
    static func insert(_ m: QueuedMessage, device: Int64, in s: BlockingConnection.Session) throws {
        try s.execute("""
            INSERT INTO queued_message(device_key, device_message_id, sender_id, app_message_id, collapse_key, priority, ttl,
              enqueued_at, expires_at, receipt, delay_while_idle, notification, kind, payload, platform_blocks)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
            ON CONFLICT(device_key, device_message_id) DO UPDATE SET sender_id = EXCLUDED.sender_id,
              app_message_id = EXCLUDED.app_message_id, collapse_key = EXCLUDED.collapse_key, priority = EXCLUDED.priority,
              ttl = EXCLUDED.ttl, enqueued_at = EXCLUDED.enqueued_at, expires_at = EXCLUDED.expires_at,
              receipt = EXCLUDED.receipt, delay_while_idle = EXCLUDED.delay_while_idle,
              notification = EXCLUDED.notification, kind = EXCLUDED.kind, payload = EXCLUDED.payload,
              platform_blocks = EXCLUDED.platform_blocks, body_id = NULL, seq = nextval('queued_message_seq_seq')
            """, binds(device, m.deviceMessageID, m.senderID, m.appMessageID, m.collapseKey, m.priority, m.timeToLive,
                       m.enqueuedAt, m.expiresAt, m.deliveryReceiptRequested ? 1 : 0, m.delayWhileIdle ? 1 : 0,
                       m.isNotification ? 1 : 0, m.kind.rawValue, m.payload, m.platformBlocks))
    }

    /// FCM's limit reached: the device's non-collapsible messages go, the notice takes their place (once).
    static func overflow(device: Int64, notice: QueuedMessage, in s: BlockingConnection.Session,
                         removals: RemovalList?) throws {
        deleteMessages("DELETE FROM queued_message WHERE device_key = $1 AND collapse_key IS NULL AND kind = 'message'",
                           binds(device), as: .discarded, in: s, removals: removals)
        let notices = try count("SELECT COUNT(*) FROM queued_message WHERE device_key = $1 AND kind = 'deleted_messages'",
                                binds(device), in: s)
        if notices == 0 { try insert(notice, device: device, in: s) }
    }

    static func count(_ sql: String, _ arguments: PostgresBindings, in s: BlockingConnection.Session) throws -> Int {
        try s.rows(sql, arguments).first.map { try $0.makeRandomAccess()[0].decode(Int.self) } ?? 0
    }

    /// One message under FCM's rules (`ccs_enqueue`, PostgresSchema); a token without a device fails
    /// the transaction with `UnknownDevice`.
    private static func enqueue(_ m: QueuedMessage, limits: QueueLimits?, in s: BlockingConnection.Session, node: String,
                                removals: RemovalList?) {
        enqueue([(m, limits)], in: s, node: node, removals: removals)
    }

    /// Messages under FCM's rules, in order, as one statement sent without waiting (`ccs_enqueue_many`).
    static func enqueue(_ run: [(QueuedMessage, QueueLimits?)], in s: BlockingConnection.Session, node: String,
                        removals: RemovalList?) {
        guard !run.isEmpty else { return }
        var batch = "["
        for (i, (m, limits)) in run.enumerated() {
            if i > 0 { batch += "," }
            var fields = Self.fields(of: m)
            fields["token"] = .string(m.token)
            if let limits {
                fields["limited"] = .bool(true)
                fields["max_keys"] = .int(Int64(limits.maxCollapseKeys))
                fields["max_plain"] = .int(Int64(limits.maxNonCollapsible))
                fields["notice"] = .object(Self.fields(of: limits.overflowNotice))
            } else {
                fields["limited"] = .bool(false)
            }
            batch += JSONValue.object(fields).encoded()
        }
        batch += "]"
        let tokens = run.map(\.0.token)
        s.send("SELECT r_index, r_id, r_kind, r_sender, r_reason, r_on_arrival FROM ccs_enqueue_many($1, $2::JSONB)",
               binds(node, batch)) { rows in
            guard let removals else { return }
            for row in rows {
                let r = row.makeRandomAccess()
                let index = try r[0].decode(Int.self)
                let onArrival = try r[5].decode(Bool.self)
                let kind = MessageKind(rawValue: try r[2].decode(String.self)) ?? .message
                guard onArrival || kind == .message || kind == .apnsNotification, tokens.indices.contains(index) else { continue }
                removals.append(QueueRemoval(token: tokens[index], deviceMessageID: try r[1].decode(String.self),
                                             reason: QueueRemoval.Reason(rawValue: try r[4].decode(String.self)) ?? .collapsed,
                                             senderID: try r[3].decode(String.self), onArrival: onArrival))
            }
        }
    }

    /// Messages their devices confirmed, gone from the queues, as one statement sent without waiting.
    static func removeMessages(_ run: [(token: String, id: String)], in s: BlockingConnection.Session) {
        guard !run.isEmpty else { return }
        s.send("""
            DELETE FROM queued_message q USING device d, unnest($1::TEXT[], $2::TEXT[]) AS x(token, id)
            WHERE d.token = x.token AND q.device_key = d.device_key AND q.device_message_id = x.id
            """, binds(run.map(\.token), run.map(\.id)))
    }

    /// A queue row's columns as `ccs_enqueue_many` reads them.
    private static func fields(of m: QueuedMessage) -> [String: JSONValue] {
        [
            "id": .string(m.deviceMessageID), "sender": .string(m.senderID), "app_id": .string(m.appMessageID),
            "key": m.collapseKey.map(JSONValue.string) ?? .null, "priority": .string(m.priority),
            "ttl": .int(Int64(m.timeToLive)), "enqueued": .int(m.enqueuedAt), "expires": .int(m.expiresAt),
            "receipt": .int(m.deliveryReceiptRequested ? 1 : 0), "dwi": .int(m.delayWhileIdle ? 1 : 0),
            "notification": .int(m.isNotification ? 1 : 0), "kind": .string(m.kind.rawValue), "payload": .string(m.payload),
            "blocks": m.platformBlocks.map(JSONValue.string) ?? .null,
        ]
    }

    /// At most `keeping` collapse keys per device: the oldest keys' messages go.
    static func trimCollapseKeys(device: Int64, keeping: Int, in s: BlockingConnection.Session,
                                 removals: RemovalList?) throws {
        let keys = try s.rows("""
            SELECT collapse_key FROM queued_message WHERE device_key = $1 AND collapse_key IS NOT NULL AND kind IN ('message', 'apns')
            GROUP BY collapse_key ORDER BY MIN(seq)
            """, binds(device)).map { try $0.makeRandomAccess()[0].decode(String.self) }
        for key in keys.dropLast(keeping) { try collapse(device: device, key: key, in: s, removals: removals) }
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

/// What one transaction's rules removed from queues, gathered as its statements' rows come back.
final class RemovalList {
    var items: [QueueRemoval] = []
    func append(_ r: QueueRemoval) { items.append(r) }
}
