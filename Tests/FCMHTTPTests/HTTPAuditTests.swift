import FCMHTTP
import Hummingbird
import HummingbirdTesting
import Testing

/// What the HTTP APIs tell the audit (docs/conformance.md, "The HTTP rules"): token fetches, 401s,
/// refused bodies and messages over the limits, each held to the sender the project names.
@Suite struct HTTPAuditTests {
    static let send = "/v1/projects/123456789/messages:send"

    func broken(_ f: Fixture) -> [String] {
        f.engine.audit.findings(sender: "123456789").map(\.rule.rawValue)
    }

    @Test func aSecondTokenWhileTheFirstIsGoodIsANeedlessFetch() async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            let access = try await f.accessToken(client: client)
            for n in 0..<3 {
                let r = try await post(client, Self.send, #"{"message":{"token":"\#(token)","data":{"n":"\#(n)"}}}"#,
                                       headers: V1APITests.bearer(access))
                #expect(r.status == .ok)
            }
            #expect(broken(f).isEmpty)
            _ = try await f.accessToken(client: client)
            #expect(broken(f) == ["reuse-access-token"])
            let finding = try #require(f.engine.audit.findings(sender: "123456789").first)
            #expect(finding.source.hasPrefix("https://developers.google.com/identity/protocols/oauth2/service-account"))
            #expect(!finding.text.contains(access), "evidence names a token by its id, never the token")
        }
    }

    @Test func anExpiredTokenPresentedAgainAfterItsRefusal() async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            let body = #"{"message":{"token":"\#(token)"}}"#
            let access = try await f.accessToken(client: client)
            _ = f.clock.advance(byMillis: 3_600_000)
            #expect(try await post(client, Self.send, body, headers: V1APITests.bearer(access)).status == .unauthorized)
            #expect(broken(f).isEmpty, "one 401 is how a client learns of the expiry")
            #expect(try await post(client, Self.send, body, headers: V1APITests.bearer(access)).status == .unauthorized)
            #expect(broken(f) == ["refresh-access-token"])
        }
    }

    @Test func refusedBodiesAndMessagesOverTheLimits() async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            let access = try await f.accessToken(client: client)
            let reserved = #"{"message":{"token":"\#(token)","data":{"from":"me"}}}"#
            #expect(try await post(client, Self.send, reserved, headers: V1APITests.bearer(access)).status == .badRequest)
            #expect(broken(f) == ["message-limits"])
            #expect(try await post(client, Self.send, reserved, headers: V1APITests.bearer(access)).status == .badRequest)
            #expect(broken(f).sorted() == ["message-limits", "message-limits", "no-retry-invalid"])
            // A legacy message over 4096 bytes, refused before it was decoded, is held to its token's sender.
            let big = #"{"to":"\#(token)","data":{"pad":"\#(String(repeating: "x", count: 5000))"}}"#
            let legacy = try await post(client, "/fcm/send", big, headers: [.contentType: "application/json", .authorization: "key=k"])
            #expect(legacy.status == .ok && String(buffer: legacy.body).contains("MessageTooBig"))
            #expect(broken(f).filter { $0 == "message-limits" }.count == 3)
        }
    }
}
