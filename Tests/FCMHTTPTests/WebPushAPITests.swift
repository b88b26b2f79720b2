import CCSEngine
import CCSProtocol
import PushDomain
import Crypto
import FCMHTTP
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing
import WebPushService

/// The Web Push endpoint and its admin routes through Hummingbird's router test client: an
/// application server (the emulator's own RFC 8291/8292 sender) posts to a subscription the
/// emulator made; the message waits, encrypted, in the subscription's device queue.
@Suite struct WebPushAPITests {
    let server = VAPIDKey(privateKey: P256.Signing.PrivateKey())

    func subscribe(_ client: any TestClientProtocol, _ body: String = "{}") async throws -> JSONValue {
        let r = try await post(client, "/emulator/v1/web-push/subscriptions", body)
        #expect(r.status == .created, "\(String(buffer: r.body))")
        return try json(r)
    }

    /// What pywebpush sends: aes128gcm, `vapid t=…, k=…`, TTL.
    func push(_ client: any TestClientProtocol, to subscription: JSONValue, _ text: String, clock: VirtualClock,
              extra: HTTPFields = [:], path: String? = nil) async throws -> TestResponse {
        let parsed = try WebPushSubscription.parse(try #require(subscription["subscription"])).get()
        let body = try WebPushEncryption.encrypt(Array(text.utf8), to: parsed)
        var headers: HTTPFields = [.contentEncoding: "aes128gcm", HTTPField.Name("TTL")!: "60",
                                   .authorization: try server.authorization(endpoint: parsed.endpoint, nowMillis: clock.nowMillis())]
        for field in extra { headers[field.name] = field.value }
        let uri = path ?? String(parsed.endpoint.dropFirst("https://fcm.googleapis.com".count))
        return try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(bytes: body))
    }

    @Test func aPushIsAcceptedQueuedEncryptedAndListedDecrypted() async throws {
        let f = try Fixture()
        try await f.test { client in
            let s = try await subscribe(client)
            let token = try #require(s["token"]?.stringValue)
            #expect(s["subscription"]?["endpoint"]?.stringValue == "https://fcm.googleapis.com/fcm/send/" + token)
            #expect(s["subscription"]?["expirationTime"] == .null && s["private_key"]?.stringValue != nil)
            let r = try await push(client, to: s, "hello", clock: f.clock)
            #expect(r.status == .created, "\(String(buffer: r.body))")
            #expect(r.headers[.location]?.hasPrefix("https://fcm.googleapis.com/m/0:") == true)
            let queue = try f.queue(token)
            let queued = try #require(queue.first)
            #expect(queue.count == 1 && !queued.payload.contains("hello"), "the payload stays encrypted until the device")
            #expect(queued.timeToLive == 60)
            let listed = try json(try await client.execute(uri: "/emulator/v1/web-push/subscriptions/\(token)/messages", method: .get))
            let first = listed["messages"]?.arrayValue?.first
            #expect(first?["data"] == "hello")
            #expect(first?["content_encoding"] == "aes128gcm")
            // The newer /wp/ path reaches the same subscription.
            #expect(try await push(client, to: s, "again", clock: f.clock, path: "/wp/\(token)").status == .created)
        }
    }

    @Test func refusalsCarryRFC8030sStatusesAndReasons() async throws {
        let f = try Fixture()
        try await f.test { client in
            let s = try await subscribe(client)
            let token = try #require(s["token"]?.stringValue)
            var noTTL = try await push(client, to: s, "x", clock: f.clock, extra: [HTTPField.Name("TTL")!: ""])
            #expect(noTTL.status == .badRequest)
            noTTL = try await push(client, to: s, "x", clock: f.clock, extra: [.authorization: "vapid t=a.b.c, k=AAAA"])
            #expect(noTTL.status == .unauthorized && String(buffer: noTTL.body).contains("VAPID key"))
            let big = try await client.execute(uri: "/fcm/send/\(token)", method: .post, headers: [HTTPField.Name("TTL")!: "1"],
                                               body: ByteBuffer(bytes: Array(repeating: 0, count: 4097)))
            #expect(big.status == .contentTooLarge)
            #expect(try await push(client, to: s, "x", clock: f.clock, path: "/fcm/send/nope").status == .notFound)
            #expect(try f.queue(token).isEmpty)
            let gone = try await post(client, "/emulator/v1/web-push/subscriptions/\(token)/unsubscribe", "")
            #expect(gone.status == .ok)
            let after = try await push(client, to: s, "x", clock: f.clock)
            #expect(after.status == .gone && String(buffer: after.body).contains("unsubscribed or expired"))
        }
    }

    @Test func anApplicationServerKeyAdmitsOnlyThatKey() async throws {
        let f = try Fixture()
        try await f.test { client in
            let s = try await subscribe(client, #"{"application_server_key":"\#(server.publicKeyBase64URL)","endpoint":"wp"}"#)
            #expect(s["subscription"]?["endpoint"]?.stringValue?.hasPrefix("https://fcm.googleapis.com/wp/") == true)
            #expect(try await push(client, to: s, "mine", clock: f.clock).status == .created)
            let other = WebPushAPITests()
            let refused = try await other.push(client, to: s, "theirs", clock: f.clock)
            #expect(refused.status == .forbidden && String(buffer: refused.body).contains("applicationServerKey"))
            let bad = try await post(client, "/emulator/v1/web-push/subscriptions", #"{"application_server_key":"AAAA"}"#)
            #expect(bad.status == .badRequest)
        }
    }

    @Test func aNewerMessageWithTheSameTopicReplacesTheWaitingOne() async throws {
        let f = try Fixture()
        try await f.test { client in
            let s = try await subscribe(client)
            let token = try #require(s["token"]?.stringValue)
            let topic: HTTPFields = [HTTPField.Name("Topic")!: "score", HTTPField.Name("Urgency")!: "high"]
            #expect(try await push(client, to: s, "1-0", clock: f.clock, extra: topic).status == .created)
            #expect(try await push(client, to: s, "2-0", clock: f.clock, extra: topic).status == .created)
            let queued = try f.queue(token)
            #expect(queued.count == 1 && queued.first?.collapseKey == "score")
        }
    }
}

extension WebPushAPITests {
    @Test func aReinstalledBrowsersEndpointEndsInItsNewToken() async throws {
        let f = try Fixture()
        try await f.test { client in
            let s = try await subscribe(client)
            let token = try #require(s["token"]?.stringValue)
            let fresh = try await f.engine.reinstall(token: token)
            #expect(fresh.webSubscription?.endpoint == "https://fcm.googleapis.com/fcm/send/" + fresh.token)
            #expect(try await push(client, to: s, "old", clock: f.clock).status == .gone)
        }
    }
}
