import GRDB
import StoreModel

/// The SQLite schema's migrations, in order (GRDB runs each once); the newest is `StoreSchema.newest`,
/// the one PostgreSQL's tables follow (docs/scaling.md).
extension Store {
    /// V1: the first schema.
    static func registerFirstSchema(_ m: inout DatabaseMigrator) {
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
                  delay_while_idle INTEGER NOT NULL,
                  notification INTEGER NOT NULL,
                  kind TEXT NOT NULL,
                  payload TEXT NOT NULL
                );
                CREATE UNIQUE INDEX queued_message_by_token ON queued_message(token, device_message_id);
                CREATE INDEX queued_message_by_collapse_key ON queued_message(token, collapse_key);
                CREATE INDEX queued_message_by_expiry ON queued_message(expires_at);
                CREATE TABLE outbound (
                  seq INTEGER PRIMARY KEY AUTOINCREMENT,
                  sender_id TEXT NOT NULL,
                  kind TEXT NOT NULL,
                  message_id TEXT NOT NULL,
                  token TEXT NOT NULL,
                  json TEXT NOT NULL,
                  created_at INTEGER NOT NULL,
                  expires_at INTEGER NOT NULL
                );
                CREATE UNIQUE INDEX outbound_by_id ON outbound(sender_id, kind, message_id);
                CREATE TABLE tray (
                  token TEXT NOT NULL,
                  device_message_id TEXT NOT NULL,
                  payload TEXT NOT NULL,
                  shown_at INTEGER NOT NULL,
                  PRIMARY KEY (token, device_message_id)
                );
                CREATE TABLE meta (
                  key TEXT PRIMARY KEY NOT NULL,
                  value TEXT NOT NULL
                );
                """)
        }
    }

    /// V2 to v7: columns and tables added one feature at a time.
    static func registerV2ToV7(_ m: inout DatabaseMigrator) {
        m.registerMigration("v2: outbound keyed by device, replaced_by column") { db in
            try db.execute(sql: """
                DROP INDEX outbound_by_id;
                CREATE UNIQUE INDEX outbound_by_id ON outbound(sender_id, kind, token, message_id);
                ALTER TABLE device ADD COLUMN replaced_by TEXT;
                UPDATE device SET replaced_by = json_extract(state, '$.replaced_by')
                  WHERE json_valid(state) AND json_extract(state, '$.replaced_by') IS NOT NULL;
                """)
        }
        m.registerMigration("v3: platform blocks of HTTP v1 messages") { db in
            try db.execute(sql: "ALTER TABLE queued_message ADD COLUMN platform_blocks TEXT")
        }
        m.registerMigration("v4: topic subscriptions") { db in
            // A fanned-out message's body is stored once (`message_body`); its queue rows name it by
            // `body_id` and keep an empty payload.
            try db.execute(sql: """
                CREATE TABLE topic_subscription (
                  sender_id TEXT NOT NULL,
                  topic TEXT NOT NULL,
                  token TEXT NOT NULL,
                  added_at INTEGER NOT NULL,
                  PRIMARY KEY (sender_id, topic, token)
                ) WITHOUT ROWID;
                CREATE INDEX topic_subscription_by_token ON topic_subscription(token);
                CREATE TABLE message_body (
                  id INTEGER PRIMARY KEY AUTOINCREMENT,
                  payload TEXT NOT NULL,
                  platform_blocks TEXT,
                  expires_at INTEGER NOT NULL
                );
                ALTER TABLE queued_message ADD COLUMN body_id INTEGER;
                CREATE INDEX queued_message_by_body ON queued_message(body_id) WHERE body_id IS NOT NULL;
                """)
        }
        m.registerMigration("v5: device groups") { db in
            // Members as a JSON array: a group has at most 20, always read and written whole.
            try db.execute(sql: """
                CREATE TABLE device_group (
                  id TEXT PRIMARY KEY NOT NULL,
                  sender_id TEXT NOT NULL,
                  name TEXT NOT NULL,
                  members TEXT NOT NULL,
                  created_at INTEGER NOT NULL
                );
                CREATE UNIQUE INDEX device_group_by_name ON device_group(sender_id, name);
                """)
        }
        m.registerMigration("v6: apns") { db in
            // Not unique: an uninstalled registration keeps its token while a new one takes it over
            // (the engine maps a token to its newest registration).
            try db.execute(sql: """
                ALTER TABLE device ADD COLUMN apns_token TEXT;
                CREATE INDEX device_by_apns_token ON device(apns_token) WHERE apns_token IS NOT NULL;
                CREATE TABLE apns_feedback (
                  bundle_id TEXT NOT NULL,
                  device_token TEXT NOT NULL,
                  timestamp INTEGER NOT NULL,
                  PRIMARY KEY (bundle_id, device_token)
                ) WITHOUT ROWID;
                """)
        }
        m.registerMigration("v7: platforms") { db in
            // A web device's push subscription (JSON); the platform's view of a notification in the
            // tray, rendered when it landed there (the queue row with its v1 blocks is gone by then).
            try db.execute(sql: """
                ALTER TABLE device ADD COLUMN web_subscription TEXT;
                ALTER TABLE tray ADD COLUMN view TEXT;
                """)
        }
    }

    /// V8: the queue and the subscriptions keyed by device number.
    static func registerV8(_ m: inout DatabaseMigrator) {
        m.registerMigration("v8: queue and subscriptions keyed by device number") { db in
            // A token is ~150 bytes and random: as the key of the queue's and the subscriptions'
            // indexes it made every fanned-out row an insert at a random place in two large
            // B-trees (a 1,000,000-subscriber fan-out took 34 s, mostly there). A small integer
            // per device, given in registration order, keeps those rows short and in key order.
            // The key is a column of its own, not `device.rowid`: VACUUM may renumber rowids.
            try db.execute(sql: """
                ALTER TABLE device ADD COLUMN device_key INTEGER;
                UPDATE device SET device_key = rowid;
                CREATE UNIQUE INDEX device_by_key ON device(device_key);
                CREATE TABLE queued_message_v8 (
                  seq INTEGER PRIMARY KEY AUTOINCREMENT,
                  device_key INTEGER NOT NULL,
                  device_message_id TEXT NOT NULL,
                  sender_id TEXT NOT NULL,
                  app_message_id TEXT NOT NULL,
                  collapse_key TEXT,
                  priority TEXT NOT NULL,
                  ttl INTEGER NOT NULL,
                  enqueued_at INTEGER NOT NULL,
                  expires_at INTEGER NOT NULL,
                  receipt INTEGER NOT NULL,
                  delay_while_idle INTEGER NOT NULL,
                  notification INTEGER NOT NULL,
                  kind TEXT NOT NULL,
                  payload TEXT NOT NULL,
                  platform_blocks TEXT,
                  body_id INTEGER
                );
                INSERT INTO queued_message_v8(seq, device_key, device_message_id, sender_id, app_message_id,
                  collapse_key, priority, ttl, enqueued_at, expires_at, receipt, delay_while_idle, notification,
                  kind, payload, platform_blocks, body_id)
                SELECT q.seq, d.device_key, q.device_message_id, q.sender_id, q.app_message_id, q.collapse_key,
                  q.priority, q.ttl, q.enqueued_at, q.expires_at, q.receipt, q.delay_while_idle, q.notification,
                  q.kind, q.payload, q.platform_blocks, q.body_id
                FROM queued_message q JOIN device d ON d.token = q.token ORDER BY q.seq;
                DROP TABLE queued_message;
                ALTER TABLE queued_message_v8 RENAME TO queued_message;
                CREATE UNIQUE INDEX queued_message_by_device ON queued_message(device_key, device_message_id);
                CREATE INDEX queued_message_by_collapse_key ON queued_message(device_key, collapse_key);
                CREATE INDEX queued_message_by_expiry ON queued_message(expires_at);
                CREATE INDEX queued_message_by_body ON queued_message(body_id) WHERE body_id IS NOT NULL;
                CREATE TABLE topic_subscription_v8 (
                  sender_id TEXT NOT NULL,
                  topic TEXT NOT NULL,
                  device_key INTEGER NOT NULL,
                  added_at INTEGER NOT NULL,
                  PRIMARY KEY (sender_id, topic, device_key)
                ) WITHOUT ROWID;
                INSERT INTO topic_subscription_v8(sender_id, topic, device_key, added_at)
                SELECT s.sender_id, s.topic, d.device_key, s.added_at
                FROM topic_subscription s JOIN device d ON d.token = s.token;
                DROP TABLE topic_subscription;
                ALTER TABLE topic_subscription_v8 RENAME TO topic_subscription;
                CREATE INDEX topic_subscription_by_device ON topic_subscription(device_key);
                """)
        }
    }

    /// V9 on.
    static func registerV9On(_ m: inout DatabaseMigrator) {
        m.registerMigration("v9: a receipt names the message it is about") { db in
            try db.execute(sql: "ALTER TABLE outbound ADD COLUMN about_message_id TEXT")
        }
        // Every enqueue counts the device's stored messages without a collapse key (FCM's 100) and
        // groups its collapse keys (FCM's 4). With `kind` in the index both are answered from the index
        // alone; without it each counted row was fetched from the table, ~100 random reads per enqueue
        // into a table of hundreds of MB once a million messages were queued (docs/benchmarks.md).
        m.registerMigration("v10: the queue limits answered from an index") { db in
            try db.execute(sql: """
                DROP INDEX queued_message_by_collapse_key;
                CREATE INDEX queued_message_by_collapse_key ON queued_message(device_key, collapse_key, kind);
                """)
        }
        // An installation's later tokens (a token refresh), comma-separated, oldest first: tokens never
        // hold a comma. On the device's row, so that another node re-reads them with the device.
        m.registerMigration(Self.newestMigration) { db in
            try db.execute(sql: "ALTER TABLE device ADD COLUMN refreshed_tokens TEXT")
        }
    }
}
