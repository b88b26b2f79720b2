import StoreModel
@testable import SQLiteStore
import Foundation
import GRDB
import Testing

/// Databases written by earlier versions open with everything in them.
@Suite struct MigrationTests {
    /// v8 moves the queue and the subscriptions from tokens to device numbers: rows written under
    /// v5's schema keep their order, fields, bodies and subscriptions.
    @Test func aVersion5QueueAndItsSubscriptionsSurviveTheMoveToDeviceNumbers() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ccs-migrate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("db.sqlite").path
        do {
            let queue = try DatabaseQueue(path: path)
            try Store.migrator.migrate(queue, upTo: "v5: device groups")
            try queue.write { db in
                for (token, id) in [("tok-b", "db"), ("tok-a", "da")] {
                    try db.execute(sql: """
                        INSERT INTO device(token, device_id, secret, app, platform, senders, created_at, status, state)
                        VALUES (?, ?, 's', 'com.example', 'android', '1', 1, 'active', '{}')
                        """, arguments: [token, id])
                }
                try db.execute(sql: "INSERT INTO message_body(payload, expires_at) VALUES ('{\"shared\":1}', 99)")
                let rows: [(String, String, String?, Int64?)] = [
                    ("tok-a", "m1", "{\"own\":1}", nil), ("tok-b", "m2", "{\"own\":2}", nil),
                    ("tok-a", "m3", "", 1), ("tok-orphan", "m4", "{}", nil),
                ]
                for (token, id, payload, body) in rows {
                    try db.execute(sql: """
                        INSERT INTO queued_message(token, device_message_id, sender_id, app_message_id, collapse_key,
                          priority, ttl, enqueued_at, expires_at, receipt, delay_while_idle, notification, kind, payload, body_id)
                        VALUES (?, ?, '1', ?, NULL, 'high', 60, 1, 99, 1, 0, 0, 'message', ?, ?)
                        """, arguments: [token, id, "app-" + id, payload, body])
                }
                try db.execute(sql: """
                    INSERT INTO topic_subscription(sender_id, topic, token, added_at)
                    VALUES ('1', 'news', 'tok-a', 5), ('1', 'news', 'tok-b', 6), ('1', 'sport', 'tok-a', 7)
                    """)
            }
        }
        let store = try Store(path: path)
        #expect(try store.queuedMessages(token: "tok-a").map(\.deviceMessageID) == ["m1", "m3"])
        #expect(try store.queuedMessages(token: "tok-a").map(\.payload) == [#"{"own":1}"#, #"{"shared":1}"#])
        #expect(try store.queuedMessages(token: "tok-b").map(\.deviceMessageID) == ["m2"])
        #expect(try store.queuedMessages(token: "tok-a").allSatisfy { $0.deliveryReceiptRequested && $0.priority == "high" })
        // A queued message of a token without a device (never written by the engine) is dropped.
        #expect(try store.queueCounts() == ["tok-a": 2, "tok-b": 1])
        let subscriptions = try store.loadSubscriptions().map { "\($0.topic):\($0.token):\($0.addedAt)" }.sorted()
        #expect(subscriptions == ["news:tok-a:5", "news:tok-b:6", "sport:tok-a:7"])
        // A device registered after the move gets a number of its own, and its messages stay its own.
        try store.apply([.upsertDevice(device("tok-c")), .enqueue(message("tok-c", "m5"), limits: nil)])
        #expect(try store.queuedMessages(token: "tok-c").map(\.deviceMessageID) == ["m5"])
        #expect(try store.queueCounts()["tok-a"] == 2)
    }
}
