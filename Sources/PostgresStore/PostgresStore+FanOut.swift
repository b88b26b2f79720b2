import StoreModel
import PostgresNIO

/// A topic or condition message written for its whole audience in one transaction, with set-based
/// statements and the same per-device rules as `enqueue` (the SQLite backend's `fanOut` explains each).
extension PostgresStore {
    static func fanOut(_ f: FanOut, in s: BlockingConnection.Session, node: String, removals: RemovalList?) throws {
        let m = f.message
        try s.execute("CREATE TEMP TABLE IF NOT EXISTS fanout_devices(device_key BIGINT PRIMARY KEY NOT NULL) ON COMMIT DELETE ROWS")
        try s.execute("DELETE FROM fanout_devices")
        // Lock 0 alone (`ccs_lock_device`): the enqueues in progress on any node finish first, later
        // ones wait for this commit, so the per-device rules stay exact.
        try s.execute("SELECT pg_advisory_xact_lock(0)")
        switch f.audience {
        case .subscribers(let sender, let topic):
            try s.execute("""
                INSERT INTO fanout_devices(device_key)
                SELECT device_key FROM topic_subscription WHERE sender_id = $1 AND topic = $2 ORDER BY device_key
                """, binds(sender, topic))
        case .tokens(let tokens):
            try s.execute("""
                INSERT INTO fanout_devices(device_key)
                SELECT device_key FROM device WHERE token = ANY($1) ORDER BY device_key ON CONFLICT DO NOTHING
                """, binds(tokens))
        }
        if f.collapseKeyIsApp {
            deleteMessages("""
                DELETE FROM queued_message WHERE kind = 'message'
                  AND device_key IN (SELECT device_key FROM fanout_devices)
                  AND collapse_key = (SELECT app FROM device d WHERE d.device_key = queued_message.device_key)
                """, PostgresBindings(), as: .collapsed, in: s, removals: removals)
        } else if let key = m.collapseKey {
            deleteMessages("""
                DELETE FROM queued_message WHERE collapse_key = $1 AND kind = 'message'
                  AND device_key IN (SELECT device_key FROM fanout_devices)
                """, binds(key), as: .collapsed, in: s, removals: removals)
        }
        let collapsible = f.collapseKeyIsApp || m.collapseKey != nil
        if !collapsible {
            let overflowing = try s.rows("""
                SELECT q.device_key FROM fanout_devices a JOIN queued_message q ON q.device_key = a.device_key
                WHERE q.collapse_key IS NULL AND q.kind = 'message'
                GROUP BY q.device_key HAVING COUNT(*) >= $1
                """, binds(f.limits.maxNonCollapsible)).map { try $0.makeRandomAccess()[0].decode(Int64.self) }
            for device in overflowing {
                try overflow(device: device, notice: f.limits.overflowNotice, in: s, removals: removals)
                try s.execute("DELETE FROM fanout_devices WHERE device_key = $1", binds(device))
            }
        }
        let body = try s.rows("INSERT INTO message_body(payload, platform_blocks, expires_at) VALUES ($1, $2, $3) RETURNING id",
                              binds(m.payload, m.platformBlocks, m.expiresAt))
            .first.map { try $0.makeRandomAccess()[0].decode(Int64.self) } ?? 0
        // No ON CONFLICT: a device already holding the id refuses the whole fan-out (as `ccs_enqueue`
        // refuses a message), instead of its message being replaced.
        var arguments = binds(m.deviceMessageID, m.senderID, m.appMessageID, m.priority, m.timeToLive, m.enqueuedAt,
                              m.expiresAt, m.deliveryReceiptRequested ? 1 : 0, m.delayWhileIdle ? 1 : 0,
                              m.isNotification ? 1 : 0, m.kind.rawValue, body)
        if f.collapseKeyIsApp {
            try s.execute("""
                INSERT INTO queued_message(device_key, device_message_id, sender_id, app_message_id, priority, ttl,
                  enqueued_at, expires_at, receipt, delay_while_idle, notification, kind, payload, body_id, collapse_key)
                SELECT a.device_key, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, '', $12, d.app
                FROM fanout_devices a JOIN device d ON d.device_key = a.device_key ORDER BY a.device_key
                """, arguments)
        } else {
            arguments.append(m.collapseKey)
            try s.execute("""
                INSERT INTO queued_message(device_key, device_message_id, sender_id, app_message_id, priority, ttl,
                  enqueued_at, expires_at, receipt, delay_while_idle, notification, kind, payload, body_id, collapse_key)
                SELECT device_key, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, '', $12, $13::TEXT
                FROM fanout_devices ORDER BY device_key
                """, arguments)
        }
        if collapsible {
            let crowded = try s.rows("""
                SELECT q.device_key FROM fanout_devices a JOIN queued_message q ON q.device_key = a.device_key
                WHERE q.collapse_key IS NOT NULL AND q.kind = 'message'
                GROUP BY q.device_key HAVING COUNT(DISTINCT q.collapse_key) > $1
                """, binds(f.limits.maxCollapseKeys)).map { try $0.makeRandomAccess()[0].decode(Int64.self) }
            for device in crowded {
                try trimCollapseKeys(device: device, keeping: f.limits.maxCollapseKeys, in: s, removals: removals)
            }
        }
        // The audience's devices connected to other nodes: those nodes hand the message over.
        try s.execute("""
            SELECT pg_notify('\(PostgresCluster.nodeChannelPrefix)' || p.node, p.token)
            FROM fanout_devices a JOIN device d ON d.device_key = a.device_key JOIN device_presence p ON p.token = d.token
              JOIN cluster_node n ON n.id = p.node
            WHERE p.node <> $1 AND n.lease_until > ccs_now_ms()
            """, binds(node))
    }
}
