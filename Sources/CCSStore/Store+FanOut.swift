import GRDB
import PushDomain

/// A topic or condition message written for its whole audience in one transaction, with set-based
/// statements: the per-device rules (collapse, the 100-message limit, the collapse-key limit) are
/// the same as `enqueue`'s, applied to every device of the audience at once.
extension Store {
    static func fanOut(_ f: FanOut, in db: Database) throws {
        let m = f.message
        // Emptied at the end of every fan-out (a failed one rolls back with its transaction).
        try db.execute(sql: "CREATE TEMP TABLE IF NOT EXISTS fanout_audience(token TEXT PRIMARY KEY NOT NULL) WITHOUT ROWID")
        switch f.audience {
        case .subscribers(let sender, let topic):
            try db.cachedStatement(sql: """
                INSERT INTO temp.fanout_audience(token)
                SELECT token FROM topic_subscription WHERE sender_id = ? AND topic = ?
                """).execute(arguments: [sender, topic])
        case .tokens(let tokens):
            let insert = try db.cachedStatement(sql: "INSERT OR IGNORE INTO temp.fanout_audience(token) VALUES (?)")
            for token in tokens { try insert.execute(arguments: [token]) }
        }
        // A newer message with a key replaces the stored ones with that key, on every device.
        if f.collapseKeyIsApp {
            try db.cachedStatement(sql: """
                DELETE FROM queued_message WHERE kind = 'message' AND token IN (SELECT token FROM temp.fanout_audience)
                  AND collapse_key = (SELECT app FROM device d WHERE d.token = queued_message.token)
                """).execute()
        } else if let key = m.collapseKey {
            try db.cachedStatement(sql: """
                DELETE FROM queued_message WHERE collapse_key = ? AND kind = 'message'
                  AND token IN (SELECT token FROM temp.fanout_audience)
                """).execute(arguments: [key])
        }
        let collapsible = f.collapseKeyIsApp || m.collapseKey != nil
        // The devices already holding the most non-collapsible messages lose them all and get the
        // deleted-messages notice (once); the new message is not stored for them either.
        var overflowing: [String] = []
        if !collapsible {
            overflowing = try String.fetchAll(db.cachedStatement(sql: """
                SELECT q.token FROM temp.fanout_audience a JOIN queued_message q ON q.token = a.token
                WHERE q.collapse_key IS NULL AND q.kind = 'message'
                GROUP BY q.token HAVING COUNT(*) >= ?
                """), arguments: [f.limits.maxNonCollapsible])
            for token in overflowing {
                try db.cachedStatement(sql: "DELETE FROM queued_message WHERE token = ? AND collapse_key IS NULL AND kind = 'message'").execute(arguments: [token])
                try db.cachedStatement(sql: "DELETE FROM temp.fanout_audience WHERE token = ?").execute(arguments: [token])
                let notices = try Int.fetchOne(db.cachedStatement(sql: """
                    SELECT COUNT(*) FROM queued_message WHERE token = ? AND kind = 'deleted_messages'
                    """), arguments: [token]) ?? 0
                if notices == 0 {
                    var notice = f.limits.overflowNotice
                    notice.token = token
                    try insert(notice, in: db)
                }
            }
        }
        try db.cachedStatement(sql: "INSERT INTO message_body(payload, platform_blocks, expires_at) VALUES (?, ?, ?)")
            .execute(arguments: [m.payload, m.platformBlocks, m.expiresAt])
        let body = db.lastInsertedRowID
        try db.cachedStatement(sql: """
            INSERT OR REPLACE INTO queued_message(token, device_message_id, sender_id, app_message_id,
              collapse_key, priority, ttl, enqueued_at, expires_at, receipt, delay_while_idle, notification, kind, payload,
              body_id)
            SELECT a.token, ?, ?, ?, CASE WHEN ? THEN d.app ELSE ? END, ?, ?, ?, ?, ?, ?, ?, ?, '', ?
            FROM temp.fanout_audience a JOIN device d ON d.token = a.token AND d.status = 'active'
            """).execute(arguments: [m.deviceMessageID, m.senderID, m.appMessageID, f.collapseKeyIsApp, m.collapseKey,
                             m.priority, m.timeToLive, m.enqueuedAt, m.expiresAt,
                             m.deliveryReceiptRequested ? 1 : 0, m.delayWhileIdle ? 1 : 0,
                             m.isNotification ? 1 : 0, m.kind.rawValue, body])
        if collapsible {
            let crowded = try String.fetchAll(db.cachedStatement(sql: """
                SELECT q.token FROM temp.fanout_audience a JOIN queued_message q ON q.token = a.token
                WHERE q.collapse_key IS NOT NULL AND q.kind = 'message'
                GROUP BY q.token HAVING COUNT(DISTINCT q.collapse_key) > ?
                """), arguments: [f.limits.maxCollapseKeys])
            for token in crowded { try trimCollapseKeys(token: token, keeping: f.limits.maxCollapseKeys, in: db) }
        }
        try db.execute(sql: "DELETE FROM temp.fanout_audience")
    }
}
