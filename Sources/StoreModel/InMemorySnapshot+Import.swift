import PushDomain

/// An export read back into `InMemoryStore`'s tables: the SQL backends' rows (a message's body may
/// be in `message_body`, by `body_id`), every value checked.
extension InMemorySnapshot {
    /// One row's columns, with the table and row named in every refusal.
    struct Row {
        let table: String, index: Int
        let object: [String: JSONValue]

        func string(_ c: String) throws -> String {
            guard let s = object[c]?.stringValue else { throw error("\(c) is not text") }
            return s
        }

        func optionalString(_ c: String) throws -> String? {
            guard let v = object[c], !v.isNull else { return nil }
            return try string(c)
        }

        func int(_ c: String) throws -> Int64 {
            guard let n = object[c]?.intValue else { throw error("\(c) is not an integer") }
            return n
        }

        func optionalInt(_ c: String) throws -> Int64? {
            guard let v = object[c], !v.isNull else { return nil }
            return try int(c)
        }

        func error(_ why: String) -> StoreSnapshot.ImportError { StoreSnapshot.ImportError("\(table)[\(index)]: \(why)") }
    }

    /// Each table's columns at the newest schema (`StoreSchema.newest`), as the SQL backends have them.
    static let columns: [String: Set<String>] = [
        "meta": ["key", "value"],
        "sender": ["sender_id", "server_key", "created_at"],
        "device": ["token", "device_id", "secret", "app", "platform", "senders", "created_at", "status", "state", "replaced_by",
                   "apns_token", "web_subscription", "device_key", "refreshed_tokens"],
        "message_body": ["id", "payload", "platform_blocks", "expires_at"],
        "queued_message": ["seq", "device_key", "device_message_id", "sender_id", "app_message_id", "collapse_key", "priority", "ttl",
                           "enqueued_at", "expires_at", "receipt", "delay_while_idle", "notification", "kind", "payload",
                           "platform_blocks", "body_id"],
        "outbound": ["seq", "sender_id", "kind", "message_id", "token", "json", "created_at", "expires_at", "about_message_id"],
        "tray": ["token", "device_message_id", "payload", "shown_at", "view"],
        "topic_subscription": ["sender_id", "topic", "device_key", "added_at"],
        "device_group": ["id", "sender_id", "name", "members", "created_at"],
        "apns_feedback": ["bundle_id", "device_token", "timestamp"],
    ]

    static func rows(_ tables: [String: JSONValue], _ name: String) throws -> [Row] {
        guard let value = tables[name] else { return [] }
        guard let array = value.arrayValue else { throw StoreSnapshot.ImportError("\(name) is not an array") }
        return try array.enumerated().map { index, row in
            guard let object = row.objectValue else { throw StoreSnapshot.ImportError("\(name)[\(index)] is not an object") }
            if let unknown = object.keys.sorted().first(where: { !(columns[name] ?? []).contains($0) }) {
                throw StoreSnapshot.ImportError("\(name)[\(index)] has an unknown column \"\(unknown)\"")
            }
            return Row(table: name, index: index, object: object)
        }
    }

    static func tables(from export: [String: JSONValue]) throws -> InMemoryTables {
        var t = InMemoryTables()
        for r in try rows(export, "meta") { t.meta[try r.string("key")] = try r.string("value") }
        for r in try rows(export, "sender") {
            let s = SenderRecord(senderID: try r.string("sender_id"), serverKey: try r.string("server_key"), createdAt: try r.int("created_at"))
            t.senders[s.senderID] = s
        }
        var tokens: [Int64: String] = [:]
        for r in try rows(export, "device") {
            let d = try device(from: r)
            let key = try r.int("device_key")
            (t.devices[d.token], t.deviceKeys[d.token], tokens[key]) = (d, key, d.token)
        }
        try readQueues(export, into: &t, tokens: tokens)
        for r in try rows(export, "outbound") {
            let o = OutboundRecord(senderID: try r.string("sender_id"), kind: try kind(r, "kind", OutboundKind.self),
                                   messageID: try r.string("message_id"), token: try r.string("token"), json: try r.string("json"),
                                   createdAt: try r.int("created_at"), expiresAt: try r.int("expires_at"),
                                   aboutMessageID: try r.optionalString("about_message_id"))
            t.outbound[.init(senderID: o.senderID, kind: o.kind, token: o.token, messageID: o.messageID)] = (try r.int("seq"), o)
        }
        for r in try rows(export, "tray") {
            let e = TrayEntry(token: try r.string("token"), deviceMessageID: try r.string("device_message_id"), payload: try r.string("payload"),
                              shownAt: try r.int("shown_at"), view: try r.optionalString("view"))
            t.trays[e.token, default: []].append((t.seq(), e))
        }
        for r in try rows(export, "topic_subscription") {
            guard let token = tokens[try r.int("device_key")] else { throw r.error("no device has this device_key") }
            t.subscriptions[.init(senderID: try r.string("sender_id"), topic: try r.string("topic"), token: token)] = try r.int("added_at")
        }
        for r in try rows(export, "device_group") {
            guard let members = (try? JSONValue.parse(try r.string("members")))?.arrayValue?.compactMap(\.stringValue) else {
                throw r.error("members is not a JSON array of tokens")
            }
            let g = DeviceGroupRecord(id: try r.string("id"), senderID: try r.string("sender_id"), name: try r.string("name"),
                                      members: members, createdAt: try r.int("created_at"))
            t.groups[g.id] = g
        }
        for r in try rows(export, "apns_feedback") {
            t.feedback[try r.string("bundle_id"), default: [:]][try r.string("device_token")] = try r.int("timestamp")
        }
        return t
    }

    static func kind<K: RawRepresentable>(_ r: Row, _ column: String, _: K.Type) throws -> K where K.RawValue == String {
        guard let k = K(rawValue: try r.string(column)) else { throw r.error("\(column) is not a known kind") }
        return k
    }

    static func device(from r: Row) throws -> DeviceRecord {
        let subscription = try r.optionalString("web_subscription").map { text -> WebPushSubscription in
            guard let json = try? JSONValue.parse(text), case .success(let s) = WebPushSubscription.parse(json) else {
                throw r.error("web_subscription is not a subscription")
            }
            return s
        }
        return DeviceRecord(token: try r.string("token"), deviceID: try r.string("device_id"), secret: try r.string("secret"),
                            app: try r.string("app"), platform: try kind(r, "platform", Platform.self),
                            senders: try r.string("senders").split(separator: ",").map(String.init), createdAt: try r.int("created_at"),
                            status: try kind(r, "status", DeviceStatus.self), state: try r.string("state"),
                            replacedBy: try r.optionalString("replaced_by"), webSubscription: subscription,
                            apnsToken: try r.optionalString("apns_token"),
                            refreshedTokens: try r.optionalString("refreshed_tokens").map { $0.split(separator: ",").map(String.init) } ?? [])
    }

    static func readQueues(_ export: [String: JSONValue], into t: inout InMemoryTables, tokens: [Int64: String]) throws {
        var bodies: [Int64: (payload: String, blocks: String?)] = [:]
        for r in try rows(export, "message_body") { bodies[try r.int("id")] = (try r.string("payload"), try r.optionalString("platform_blocks")) }
        for r in try rows(export, "queued_message").sorted(by: { (try? $0.int("seq")) ?? 0 < (try? $1.int("seq")) ?? 0 }) {
            guard let token = tokens[try r.int("device_key")] else { throw r.error("no device has this device_key") }
            let body = try r.optionalInt("body_id").map { id in
                guard let body = bodies[id] else { throw r.error("no message_body has id \(id)") }
                return body
            }
            let m = QueuedMessage(token: token, deviceMessageID: try r.string("device_message_id"), senderID: try r.string("sender_id"),
                                  appMessageID: try r.string("app_message_id"), collapseKey: try r.optionalString("collapse_key"),
                                  priority: try r.string("priority"), timeToLive: Int(clamping: try r.int("ttl")),
                                  enqueuedAt: try r.int("enqueued_at"), expiresAt: try r.int("expires_at"),
                                  deliveryReceiptRequested: try r.int("receipt") != 0, delayWhileIdle: try r.int("delay_while_idle") != 0,
                                  isNotification: try r.int("notification") != 0, kind: try kind(r, "kind", MessageKind.self),
                                  payload: try body?.payload ?? r.string("payload"), platformBlocks: try body?.blocks ?? r.optionalString("platform_blocks"))
            t.queues[token, default: []].append(.init(seq: try r.int("seq"), message: m))
        }
        t.nextSeq = max(t.nextSeq, (t.queues.values.joined().map(\.seq).max() ?? 0) + 1, (t.outbound.values.map(\.seq).max() ?? 0) + 1)
    }
}
