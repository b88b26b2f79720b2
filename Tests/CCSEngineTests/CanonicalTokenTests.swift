import CCSEngine
import CCSProtocol
import PushDomain
import StoreModel
import Testing

/// A token refresh and the canonical registration ids it brings (docs/semantics.md).
@Suite struct CanonicalTokenTests {
    func sendResult(_ h: Harness, to token: String, id: String, sender: String = "111") async -> SendResult {
        await withCheckedContinuation { cont in
            h.engine.send(SendRequest(sender: sender, target: .token(token),
                                      message: DownstreamMessage(to: token, messageID: id, data: ["id": id]).canonical)) {
                cont.resume(returning: $0[0])
            }
        }
    }

    @Test func everyTokenReachesTheInstallationAndOlderOnesNameTheNewest() async throws {
        let h = try Harness()
        let device = try await h.register()
        let first = try await h.engine.refreshToken(device.token)
        let fresh = first.canonicalToken
        #expect(first.token == device.token && first.refreshedTokens == [fresh])
        // The instance id (the part before ":") stays: it is the installation's.
        #expect(RegistrationToken.instanceID(of: fresh) == RegistrationToken.instanceID(of: device.token))
        #expect(fresh != device.token && RegistrationToken.looksValid(fresh))

        guard case .accepted(device.token, let id1?, fresh?) = await sendResult(h, to: device.token, id: "old") else {
            Issue.record("a message to the first token is accepted with the canonical id"); return
        }
        guard case .accepted(fresh, let id2?, nil) = await sendResult(h, to: fresh, id: "new") else {
            Issue.record("a message to the newest token is accepted without a canonical id"); return
        }
        // Both wait in the installation's one queue.
        #expect(try h.queue(device.token).map(\.deviceMessageID) == [id1, id2])

        // A second refresh: the first two tokens both name the third.
        let third = try await h.engine.refreshToken(fresh).canonicalToken
        guard case .accepted(_, _, third?) = await sendResult(h, to: fresh, id: "middle") else {
            Issue.record("an earlier refreshed token names the newest"); return
        }
        #expect(h.engine.device(token: third)?.token == device.token)
        #expect(h.engine.device(token: fresh)?.refreshedTokens == [fresh, third])
    }

    @Test func theAppUsesItsNewestTokenUpstreamAndForTopics() async throws {
        let h = try Harness()
        let device = try await h.register()
        let fresh = try await h.engine.refreshToken(device.token).canonicalToken
        let server = h.appServer(id: "c1")
        _ = await h.connect(device.token)
        #expect(await h.upstream(device.token, .object(["to": "111@gcm.googleapis.com", "message_id": "u1",
                                                        "data": .object(["k": "v"])])) == .sent(messageID: "u1"))
        try await h.waitUntil { !server.sent.withLock { $0.isEmpty } }
        let json = try #require(server.sent.withLock { $0.first }).json
        #expect(try JSONValue.parse(json)["from"]?.stringValue == fresh)

        // A subscription made with the new token is the installation's.
        let results = await h.engine.subscribe([TopicSubscriptionChange(token: fresh, senderID: "111")], to: "news")
        #expect(results.count == 1 && (try? results[0].get()) != nil)
        #expect(h.engine.topics(token: device.token, senderID: "111")?.keys.sorted() == ["news"])
        #expect(h.engine.topics(token: fresh, senderID: "111")?.keys.sorted() == ["news"])
    }

    @Test func refreshedTokensSurviveARestart() async throws {
        let store = Harness.newStore()
        let token: String, fresh: String
        do {
            let h = try Harness(store: store)
            token = try await h.register().token
            fresh = try await h.engine.refreshToken(token).canonicalToken
            await h.settle()
        }
        let h = try Harness(store: store)
        #expect(h.engine.device(token: fresh)?.token == token)
        guard case .accepted(token, _, fresh?) = await sendResult(h, to: token, id: "after-restart") else {
            Issue.record("the canonical id is known after a restart"); return
        }
    }

    @Test func anUninstalledAppGetsNoNewTokenAndItsTokensAreDead() async throws {
        let h = try Harness()
        let device = try await h.register()
        let fresh = try await h.engine.refreshToken(device.token).canonicalToken
        try await h.engine.uninstall(token: fresh)
        #expect(h.engine.device(token: device.token)?.status == .uninstalled)
        #expect(await sendResult(h, to: fresh, id: "x") == .refused(.unregistered(token: fresh)))
        #expect(await sendResult(h, to: device.token, id: "y") == .refused(.unregistered(token: device.token)))
        await #expect(throws: DeviceManagementError.self) { _ = try await h.engine.refreshToken(device.token) }
        await #expect(throws: DeviceManagementError.self) { _ = try await h.engine.refreshToken("unknown-token") }
        #expect(await sendResult(h, to: "unknown-token", id: "z") == .refused(.invalidRegistration(token: "unknown-token")))
    }

    @Test func anInstallationGetsABoundedNumberOfTokens() async throws {
        let h = try Harness()
        let device = try await h.register()
        for _ in 0..<Engine.maximumRefreshedTokens { _ = try await h.engine.refreshToken(device.token) }
        await #expect(throws: DeviceManagementError.self) { _ = try await h.engine.refreshToken(device.token) }
        #expect(h.engine.device(token: device.token)?.refreshedTokens.count == Engine.maximumRefreshedTokens)
    }
}
