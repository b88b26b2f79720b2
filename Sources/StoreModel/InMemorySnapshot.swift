import PushDomain

/// `InMemoryStore`'s tables as the export format's rows (docs/export-format.md: the same tables
/// and columns as the SQL backends; a message's body is inline, never in `message_body`), and back.
enum InMemorySnapshot {
    static func rows(of t: InMemoryTables) -> [String: [JSONValue]] {
        var tables: [String: [JSONValue]] = [:]
        tables["meta"] = t.meta.sorted { $0.key < $1.key }.map { .object(["key": .string($0.key), "value": .string($0.value)]) }
        tables["sender"] = t.senders.values.sorted { $0.senderID < $1.senderID }.map {
            .object(["sender_id": .string($0.senderID), "server_key": .string($0.serverKey), "created_at": .int($0.createdAt)])
        }
        tables["device"] = t.devices.values.sorted { $0.token < $1.token }.map { device(row: $0, key: t.deviceKeys[$0.token] ?? 0) }
        tables["queued_message"] = t.queues.flatMap { token, queue in
            queue.map { message(row: $0, key: t.deviceKeys[token] ?? 0) }
        }.sorted { ($0["seq"]?.intValue ?? 0) < ($1["seq"]?.intValue ?? 0) }
        tables["outbound"] = t.outbound.values.sorted { $0.seq < $1.seq }.map { seq, o in
            .object(["seq": .int(seq), "sender_id": .string(o.senderID), "kind": .string(o.kind.rawValue), "message_id": .string(o.messageID),
                     "token": .string(o.token), "json": .string(o.json), "created_at": .int(o.createdAt), "expires_at": .int(o.expiresAt),
                     "about_message_id": o.aboutMessageID.map(JSONValue.string) ?? .null])
        }
        tables["tray"] = t.trays.values.joined().sorted { ($0.entry.token, $0.seq) < ($1.entry.token, $1.seq) }.map { _, e in
            .object(["token": .string(e.token), "device_message_id": .string(e.deviceMessageID), "payload": .string(e.payload),
                     "shown_at": .int(e.shownAt), "view": e.view.map(JSONValue.string) ?? .null])
        }
        tables["topic_subscription"] = t.subscriptions.sorted { ($0.key.senderID, $0.key.topic, $0.key.token) < ($1.key.senderID, $1.key.topic, $1.key.token) }.map {
            .object(["sender_id": .string($0.key.senderID), "topic": .string($0.key.topic),
                     "device_key": .int(t.deviceKeys[$0.key.token] ?? 0), "added_at": .int($0.value)])
        }
        tables["device_group"] = t.groups.values.sorted { $0.id < $1.id }.map {
            .object(["id": .string($0.id), "sender_id": .string($0.senderID), "name": .string($0.name),
                     "members": .string(JSONValue.array($0.members.map(JSONValue.string)).encoded()), "created_at": .int($0.createdAt)])
        }
        tables["apns_feedback"] = t.feedback.flatMap { bundle, tokens in
            tokens.map { JSONValue.object(["bundle_id": .string(bundle), "device_token": .string($0.key), "timestamp": .int($0.value)]) }
        }
        return tables
    }

    static func device(row d: DeviceRecord, key: Int64) -> JSONValue {
        .object(["token": .string(d.token), "device_id": .string(d.deviceID), "secret": .string(d.secret), "app": .string(d.app),
                 "platform": .string(d.platform.rawValue), "senders": .string(d.senders.joined(separator: ",")),
                 "created_at": .int(d.createdAt), "status": .string(d.status.rawValue), "state": .string(d.state),
                 "replaced_by": d.replacedBy.map(JSONValue.string) ?? .null, "apns_token": d.apnsToken.map(JSONValue.string) ?? .null,
                 "web_subscription": d.webSubscription.map { .string($0.storedJSON.encoded()) } ?? .null, "device_key": .int(key),
                 "refreshed_tokens": d.refreshedTokens.isEmpty ? .null : .string(d.refreshedTokens.joined(separator: ","))])
    }

    static func message(row q: InMemoryTables.Queued, key: Int64) -> JSONValue {
        let m = q.message
        return .object(["seq": .int(q.seq), "device_key": .int(key), "device_message_id": .string(m.deviceMessageID),
                        "sender_id": .string(m.senderID), "app_message_id": .string(m.appMessageID),
                        "collapse_key": m.collapseKey.map(JSONValue.string) ?? .null, "priority": .string(m.priority),
                        "ttl": .int(Int64(m.timeToLive)), "enqueued_at": .int(m.enqueuedAt), "expires_at": .int(m.expiresAt),
                        "receipt": .int(m.deliveryReceiptRequested ? 1 : 0), "delay_while_idle": .int(m.delayWhileIdle ? 1 : 0),
                        "notification": .int(m.isNotification ? 1 : 0), "kind": .string(m.kind.rawValue), "payload": .string(m.payload),
                        "platform_blocks": m.platformBlocks.map(JSONValue.string) ?? .null, "body_id": .null])
    }
}
