import GRDB
import PushDomain
import StoreModel

/// A topic or condition message written for its whole audience in one transaction, with set-based
/// statements: the per-device rules (collapse, the 100-message limit, the collapse-key limit) are
/// the same as `enqueue`'s, applied to every device of the audience at once.
///
/// The audience is a temporary table of device numbers (`device_key`, migration v8), walked in
/// key order: every statement below then touches the queue's indexes in key order rather than at
/// random places, which is what makes a million-row fan-out take seconds instead of half a minute
/// (docs/benchmarks.md, "Topic fan-out").
extension Store {
    static func fanOut(_ f: FanOut, in db: Database, removals: QueueRemovals?) throws {
        let m = f.message
        // Emptied at the end of every fan-out (a failed one rolls back with its transaction).
        try db.execute(sql: "CREATE TEMP TABLE IF NOT EXISTS fanout_devices(device_key INTEGER PRIMARY KEY NOT NULL)")
        switch f.audience {
        case .subscribers(let sender, let topic):
            try db.cachedStatement(sql: """
                INSERT INTO temp.fanout_devices(device_key)
                SELECT device_key FROM topic_subscription WHERE sender_id = ? AND topic = ?
                """).execute(arguments: [sender, topic])
        case .tokens(let tokens):
            let insert = try db.cachedStatement(sql: """
                INSERT OR IGNORE INTO temp.fanout_devices(device_key) SELECT device_key FROM device WHERE token = ?
                """)
            for token in tokens { try insert.execute(arguments: [token]) }
        }
        // A newer message with a key replaces the stored ones with that key, on every device.
        if f.collapseKeyIsApp {
            try deleteMessages(sql: """
                DELETE FROM queued_message WHERE kind = 'message'
                  AND device_key IN (SELECT device_key FROM temp.fanout_devices)
                  AND collapse_key = (SELECT app FROM device d WHERE d.device_key = queued_message.device_key)
                """, arguments: [], as: .collapsed, in: db, removals: removals)
        } else if let key = m.collapseKey {
            try deleteMessages(sql: """
                DELETE FROM queued_message WHERE collapse_key = ? AND kind = 'message'
                  AND device_key IN (SELECT device_key FROM temp.fanout_devices)
                """, arguments: [key], as: .collapsed, in: db, removals: removals)
        }
        let collapsible = f.collapseKeyIsApp || m.collapseKey != nil
        // The devices already holding the most non-collapsible messages lose them all and get the
        // deleted-messages notice (once); the new message is not stored for them either.
        if !collapsible {
            let overflowing = try Int64.fetchAll(db.cachedStatement(sql: """
                SELECT q.device_key FROM temp.fanout_devices a JOIN queued_message q ON q.device_key = a.device_key
                WHERE q.collapse_key IS NULL AND q.kind = 'message'
                GROUP BY q.device_key HAVING COUNT(*) >= ?
                """), arguments: [f.limits.maxNonCollapsible])
            for device in overflowing {
                try overflow(device: device, notice: f.limits.overflowNotice, in: db, removals: removals)
                try db.cachedStatement(sql: "DELETE FROM temp.fanout_devices WHERE device_key = ?").execute(arguments: [device])
            }
        }
        try db.cachedStatement(sql: "INSERT INTO message_body(payload, platform_blocks, expires_at) VALUES (?, ?, ?)")
            .execute(arguments: [m.payload, m.platformBlocks, m.expiresAt])
        let body = db.lastInsertedRowID
        let arguments: StatementArguments = [m.deviceMessageID, m.senderID, m.appMessageID, m.priority, m.timeToLive,
                                             m.enqueuedAt, m.expiresAt, m.deliveryReceiptRequested ? 1 : 0,
                                             m.delayWhileIdle ? 1 : 0, m.isNotification ? 1 : 0, m.kind.rawValue, body]
        if f.collapseKeyIsApp {
            // Each device's app is its key. CROSS JOIN keeps the audience as the outer loop (SQLite
            // would otherwise scan `device` in registration order and insert at random places).
            // A device already holding the id refuses the whole fan-out (`Store.insert`).
            try db.cachedStatement(sql: """
                INSERT INTO queued_message(device_key, device_message_id, sender_id, app_message_id,
                  priority, ttl, enqueued_at, expires_at, receipt, delay_while_idle, notification, kind, payload,
                  body_id, collapse_key)
                SELECT a.device_key, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, d.app
                FROM temp.fanout_devices a CROSS JOIN device d ON d.device_key = a.device_key
                """).execute(arguments: arguments)
        } else {
            // The audience holds active devices only (an uninstall removes the subscriptions; a
            // condition's matches are active devices), so no join with `device` is needed.
            try db.cachedStatement(sql: """
                INSERT INTO queued_message(device_key, device_message_id, sender_id, app_message_id,
                  priority, ttl, enqueued_at, expires_at, receipt, delay_while_idle, notification, kind, payload,
                  body_id, collapse_key)
                SELECT device_key, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ? FROM temp.fanout_devices
                """).execute(arguments: arguments + [m.collapseKey])
        }
        if collapsible {
            let crowded = try Int64.fetchAll(db.cachedStatement(sql: """
                SELECT q.device_key FROM temp.fanout_devices a JOIN queued_message q ON q.device_key = a.device_key
                WHERE q.collapse_key IS NOT NULL AND q.kind = 'message'
                GROUP BY q.device_key HAVING COUNT(DISTINCT q.collapse_key) > ?
                """), arguments: [f.limits.maxCollapseKeys])
            for device in crowded {
                try trimCollapseKeys(device: device, keeping: f.limits.maxCollapseKeys, in: db, removals: removals)
            }
        }
        try db.execute(sql: "DELETE FROM temp.fanout_devices")
    }
}
