import CCSProtocol
import PushDomain
import Locking
import WebPushService

/// What each emulator-served subscription received, decrypted (web-push-testing's "get
/// notifications"): the newest `perSubscription` messages of at most `subscriptions` subscriptions,
/// in memory (the messages themselves are durable in the device's queue until delivered).
final class WebPushInbox: Sendable {
    static let perSubscription = 100
    static let subscriptions = 10_000

    struct Entry: Sendable {
        var id: String
        var atMillis: Int64
        var message: AcceptedPushMessage
    }

    private let entries = Locked<[String: [Entry]]>([:])

    func received(_ message: AcceptedPushMessage, id: String, token: String, atMillis: Int64) {
        entries.withLock { all in
            if all[token] == nil, all.count >= Self.subscriptions, let any = all.keys.first { all[any] = nil }
            var list = all[token, default: []]
            list.append(Entry(id: id, atMillis: atMillis, message: message))
            if list.count > Self.perSubscription { list.removeFirst(list.count - Self.perSubscription) }
            all[token] = list
        }
    }

    func messages(token: String) -> [Entry] { entries.withLock { $0[token] ?? [] } }

    func forget(token: String) { _ = entries.withLock { $0.removeValue(forKey: token) } }

    static func json(_ entry: Entry) -> JSONValue {
        let m = entry.message
        guard case .object(var fields) = PushEventView.json(plaintext: m.plaintext, hasPayload: !m.body.isEmpty) else {
            return .null
        }
        fields["message_id"] = .string(entry.id)
        fields["received_at"] = .int(entry.atMillis)
        fields["ttl"] = .int(Int64(m.ttl))
        fields["urgency"] = .string(m.urgency.rawValue)
        fields["topic"] = m.topic.map { .string($0) } ?? .null
        fields["content_encoding"] = m.encoding.map { .string($0.rawValue) } ?? .null
        fields["vapid_key"] = .string(Base64URL.encode(m.applicationServer.publicKey))
        fields["vapid_subject"] = .string(m.applicationServer.subject)
        return .object(fields)
    }
}
