import StoreModel
import PostgresNIO
import PushDomain

/// What the engine reads at start and for the admin views, on the reader connection.
extension PostgresStore {
    public func loadSenders() throws -> [SenderRecord] {
        try read { s in
            try s.rows("SELECT sender_id, server_key, created_at FROM sender").map { row in
                let r = row.makeRandomAccess()
                return SenderRecord(senderID: try r[0].decode(String.self), serverKey: try r[1].decode(String.self),
                                    createdAt: try r[2].decode(Int64.self))
            }
        }
    }

    public func loadDevices() throws -> [DeviceRecord] {
        try read { s in
            try s.rows("SELECT \(Self.deviceColumns) FROM device ORDER BY created_at, token COLLATE \"C\"").map(Self.device(from:))
        }
    }

    public func device(token: String) throws -> DeviceRecord? {
        try read { s in try s.rows("SELECT \(Self.deviceColumns) FROM device WHERE token = $1", binds(token)).first.map(Self.device(from:)) }
    }

    static let deviceColumns = """
        token, device_id, secret, app, platform, senders, created_at, status, state, replaced_by, web_subscription, apns_token,
        refreshed_tokens
        """

    static func device(from row: PostgresRow) throws -> DeviceRecord {
        let r = row.makeRandomAccess()
        let senders = try r[5].decode(String.self)
        let subscription = try r[10].decode(String?.self)
        let refreshed = try r[12].decode(String?.self)
        return DeviceRecord(token: try r[0].decode(String.self), deviceID: try r[1].decode(String.self),
                            secret: try r[2].decode(String.self), app: try r[3].decode(String.self),
                            platform: Platform(rawValue: try r[4].decode(String.self)) ?? .android,
                            senders: senders.split(separator: ",").map(String.init),
                            createdAt: try r[6].decode(Int64.self),
                            status: DeviceStatus(rawValue: try r[7].decode(String.self)) ?? .uninstalled,
                            state: try r[8].decode(String.self), replacedBy: try r[9].decode(String?.self),
                            webSubscription: subscription.flatMap { try? JSONValue.parse($0) }
                                .flatMap { try? WebPushSubscription.parse($0).get() },
                            apnsToken: try r[11].decode(String?.self),
                            refreshedTokens: refreshed.map { $0.split(separator: ",").map(String.init) } ?? [])
    }

    public func sender(id: String) throws -> SenderRecord? {
        try read { s in
            try s.rows("SELECT sender_id, server_key, created_at FROM sender WHERE sender_id = $1", binds(id)).first.map { row in
                let r = row.makeRandomAccess()
                return SenderRecord(senderID: try r[0].decode(String.self), serverKey: try r[1].decode(String.self),
                                    createdAt: try r[2].decode(Int64.self))
            }
        }
    }

    public func loadDeviceGroups() throws -> [DeviceGroupRecord] {
        try read { s in
            try s.rows("SELECT id, sender_id, name, members, created_at FROM device_group ORDER BY created_at, id COLLATE \"C\"")
                .map(Self.group(from:))
        }
    }

    public func deviceGroup(id: String) throws -> DeviceGroupRecord? {
        try read { s in
            try s.rows("SELECT id, sender_id, name, members, created_at FROM device_group WHERE id = $1", binds(id))
                .first.map(Self.group(from:))
        }
    }

    static func group(from row: PostgresRow) throws -> DeviceGroupRecord {
        let r = row.makeRandomAccess()
        let members = ((try? JSONValue.parse(try r[3].decode(String.self)))?.arrayValue ?? []).compactMap(\.stringValue)
        return DeviceGroupRecord(id: try r[0].decode(String.self), senderID: try r[1].decode(String.self),
                                 name: try r[2].decode(String.self), members: members, createdAt: try r[4].decode(Int64.self))
    }

    public func subscriptions(token: String) throws -> [TopicSubscription] {
        try read { s in
            try s.rows("""
                SELECT s.sender_id, s.topic, d.token, s.added_at FROM topic_subscription s JOIN device d ON d.device_key = s.device_key
                WHERE d.token = $1
                """, binds(token)).map(Self.subscription(from:))
        }
    }

    static func subscription(from row: PostgresRow) throws -> TopicSubscription {
        let r = row.makeRandomAccess()
        return TopicSubscription(senderID: try r[0].decode(String.self), topic: try r[1].decode(String.self),
                                 token: try r[2].decode(String.self), addedAt: try r[3].decode(Int64.self))
    }

    public func loadSubscriptions() throws -> [TopicSubscription] {
        try read { s in
            try s.rows("""
                SELECT s.sender_id, s.topic, d.token, s.added_at FROM topic_subscription s JOIN device d ON d.device_key = s.device_key
                """).map(Self.subscription(from:))
        }
    }

    public func loadOutbound() throws -> [OutboundRecord] {
        try read { s in
            try s.rows("""
                SELECT sender_id, kind, message_id, token, json, created_at, expires_at, about_message_id FROM outbound ORDER BY seq
                """).map(Self.outbound(from:))
        }
    }

    static func outbound(from row: PostgresRow) throws -> OutboundRecord {
        let r = row.makeRandomAccess()
        return OutboundRecord(senderID: try r[0].decode(String.self),
                              kind: OutboundKind(rawValue: try r[1].decode(String.self)) ?? .upstream,
                              messageID: try r[2].decode(String.self), token: try r[3].decode(String.self),
                              json: try r[4].decode(String.self), createdAt: try r[5].decode(Int64.self),
                              expiresAt: try r[6].decode(Int64.self), aboutMessageID: try r[7].decode(String?.self))
    }

    public func queuedMessages(token: String) throws -> [QueuedMessage] {
        try read { s in
            try s.rows("""
                SELECT d.token, q.device_message_id, q.sender_id, q.app_message_id, q.collapse_key, q.priority, q.ttl,
                  q.enqueued_at, q.expires_at, q.receipt, q.delay_while_idle, q.notification, q.kind,
                  COALESCE(b.payload, q.payload), COALESCE(b.platform_blocks, q.platform_blocks)
                FROM device d JOIN queued_message q ON q.device_key = d.device_key
                  LEFT JOIN message_body b ON b.id = q.body_id
                WHERE d.token = $1 ORDER BY q.seq
                """, binds(token)).map { row in
                let r = row.makeRandomAccess()
                return QueuedMessage(token: try r[0].decode(String.self), deviceMessageID: try r[1].decode(String.self),
                                     senderID: try r[2].decode(String.self), appMessageID: try r[3].decode(String.self),
                                     collapseKey: try r[4].decode(String?.self), priority: try r[5].decode(String.self),
                                     timeToLive: try r[6].decode(Int.self), enqueuedAt: try r[7].decode(Int64.self),
                                     expiresAt: try r[8].decode(Int64.self),
                                     deliveryReceiptRequested: try r[9].decode(Int64.self) != 0,
                                     delayWhileIdle: try r[10].decode(Int64.self) != 0,
                                     isNotification: try r[11].decode(Int64.self) != 0,
                                     kind: MessageKind(rawValue: try r[12].decode(String.self)) ?? .message,
                                     payload: try r[13].decode(String.self), platformBlocks: try r[14].decode(String?.self))
            }
        }
    }

    public func queueCounts() throws -> [String: Int] {
        try read { s in
            var counts: [String: Int] = [:]
            for row in try s.rows("""
                SELECT d.token, q.n FROM (SELECT device_key, COUNT(*) AS n FROM queued_message GROUP BY device_key) q
                JOIN device d ON d.device_key = q.device_key
                """) {
                let r = row.makeRandomAccess()
                counts[try r[0].decode(String.self)] = try r[1].decode(Int.self)
            }
            return counts
        }
    }

    /// The largest microsecond stamp in a stored device message id (`0:<micros>%…`): ids made after
    /// a restart never repeat one still queued or in a tray.
    public func largestMessageMicros() throws -> Int64 {
        try read { s in
            try s.rows("""
                SELECT MAX(substring(id from '^0:([0-9]{1,18})%')::BIGINT) FROM (
                  SELECT device_message_id AS id FROM queued_message UNION ALL SELECT device_message_id FROM tray
                ) ids WHERE id ~ '^0:[0-9]{1,18}%'
                """).first.map { try $0.makeRandomAccess()[0].decode(Int64?.self) ?? 0 } ?? 0
        }
    }

    public func tray(token: String) throws -> [TrayEntry] {
        try read { s in
            try s.rows("""
                SELECT token, device_message_id, payload, shown_at, view FROM tray WHERE token = $1 ORDER BY shown_at, seq
                """, binds(token)).map { row in
                let r = row.makeRandomAccess()
                return TrayEntry(token: try r[0].decode(String.self), deviceMessageID: try r[1].decode(String.self),
                                 payload: try r[2].decode(String.self), shownAt: try r[3].decode(Int64.self),
                                 view: try r[4].decode(String?.self))
            }
        }
    }

    public func apnsFeedback(bundleID: String) throws -> [APNsFeedbackRecord] {
        try read { s in
            try s.rows("""
                SELECT bundle_id, device_token, timestamp FROM apns_feedback WHERE bundle_id = $1
                ORDER BY timestamp, device_token COLLATE "C"
                """, binds(bundleID)).map { row in
                let r = row.makeRandomAccess()
                return APNsFeedbackRecord(bundleID: try r[0].decode(String.self), deviceToken: try r[1].decode(String.self),
                                          timestamp: try r[2].decode(Int64.self))
            }
        }
    }

    public func meta(_ key: String) throws -> String? {
        try read { s in
            try s.rows("SELECT value FROM meta WHERE key = $1", binds(key)).first.map { try $0.makeRandomAccess()[0].decode(String.self) }
        }
    }
}
