import DeliveryCore
import CCSEngine
import CCSProtocol
import PushDomain
import StoreModel
import Foundation
import Testing

/// Topic subscriptions and fan-out: each subscriber gets the message as if it had been sent to its
/// token, the audience is fixed at the send, and everything survives a restart.
@Suite struct TopicTests {
    func subscribe(_ h: Harness, _ tokens: [String], to topic: String, sender: String = "111") async -> [Result<Void, TopicSubscriptionError>] {
        await h.engine.subscribe(tokens.map { TopicSubscriptionChange(token: $0, senderID: sender) }, to: topic)
    }

    func send(_ h: Harness, _ target: Target, _ message: Message, sender: String = "111") async -> SendResult {
        await withCheckedContinuation { c in
            h.engine.send(SendRequest(sender: sender, target: target, message: message)) { c.resume(returning: $0[0]) }
        }
    }

    @Test func aTopicMessageReachesOnlineAndOfflineSubscribersOnlyWithTheTopicAsFrom() async throws {
        let h = try Harness()
        let online = try await h.register(), offline = try await h.register(), other = try await h.register()
        #expect(await subscribe(h, [online.token, offline.token], to: "news").allSatisfy { (try? $0.get()) != nil })
        let device = await h.connect(online.token)
        let result = await send(h, .topic("news"), Message(messageID: "m1", data: ["k": "v"]))
        guard case .fannedOut(let number) = result else { Issue.record("\(result)"); return }
        #expect(number > 0)
        try await h.waitUntil { device.ids.count == 1 }
        #expect(device.payloads[0]["from"] == "/topics/news")
        #expect(device.payloads[0]["data"] == ["k": "v"])
        let stored = try h.queue(offline.token)
        #expect(stored.count == 1)
        #expect(stored[0].appMessageID == "m1")
        #expect(try JSONValue.parse(stored[0].payload)["from"] == "/topics/news")
        #expect(try h.queue(other.token).isEmpty)
        // Every subscriber holds the same body and the same message id.
        #expect(stored[0].deviceMessageID == device.ids[0])
    }

    @Test func aTopicWithoutSubscribersIsStillASuccess() async throws {
        let h = try Harness()
        let result = await send(h, .topic("nobody"), Message(messageID: "m"))
        guard case .fannedOut = result else { Issue.record("\(result)"); return }
    }

    @Test func conditionsSelectByTheirExpressionIncludingNegation() async throws {
        let h = try Harness()
        let a = try await h.register(), ab = try await h.register(), none = try await h.register()
        let otherSender = try await h.register(senders: ["222"])
        _ = await subscribe(h, [a.token, ab.token], to: "A")
        _ = await subscribe(h, [ab.token], to: "B")
        _ = await send(h, .condition("'A' in topics && 'B' in topics"), Message(messageID: "both"))
        _ = await send(h, .condition("'A' in topics && !('B' in topics)"), Message(messageID: "a-only"))
        _ = await send(h, .condition("!('A' in topics)"), Message(messageID: "not-a"))
        await h.settle()
        #expect(try h.queue(a.token).map(\.appMessageID) == ["a-only"])
        #expect(try h.queue(ab.token).map(\.appMessageID) == ["both"])
        #expect(try h.queue(none.token).map(\.appMessageID) == ["not-a"])
        #expect(try h.queue(otherSender.token).isEmpty)
        #expect(try JSONValue.parse(h.queue(ab.token)[0].payload)["from"] == "111")
        let bad = await send(h, .condition("'A' in topics &&"), Message(messageID: "x"))
        guard case .refused(.invalidTopic) = bad else { Issue.record("\(bad)"); return }
    }

    @Test func aDeviceSubscribedAfterTheSendDoesNotGetIt() async throws {
        let h = try Harness()
        let early = try await h.register(), late = try await h.register()
        _ = await subscribe(h, [early.token], to: "t")
        _ = await send(h, .topic("t"), Message(messageID: "m"))
        _ = await subscribe(h, [late.token], to: "t")
        await h.settle()
        #expect(try h.queue(early.token).count == 1)
        #expect(try h.queue(late.token).isEmpty)
    }

    @Test func perDeviceRulesHoldInTheFanOut() async throws {
        let h = try Harness(configuration: .init(maxStoredNonCollapsible: 3))
        let full = try await h.register(), empty = try await h.register()
        _ = await subscribe(h, [full.token, empty.token], to: "t")
        for i in 0..<3 { _ = await h.send(data("direct-\(i)", to: full.token)) }
        // The full device loses its three and gets the notice; the other stores the message.
        _ = await send(h, .topic("t"), Message(messageID: "over", data: ["a": "b"]))
        await h.settle()
        #expect(try h.queue(full.token).map(\.kind) == [.deletedMessages])
        #expect(try h.queue(empty.token).map(\.appMessageID) == ["over"])
        // A collapse key replaces the stored message with that key on every device.
        _ = await send(h, .topic("t"), Message(messageID: "c1", collapseKey: "score"))
        _ = await send(h, .topic("t"), Message(messageID: "c2", collapseKey: "score"))
        await h.settle()
        #expect(try h.queue(empty.token).map(\.appMessageID) == ["over", "c2"])
        // A notification without a key collapses under the device's app.
        _ = await send(h, .topic("t"), Message(messageID: "n1", notification: ["title": "1"]))
        _ = await send(h, .topic("t"), Message(messageID: "n2", notification: ["title": "2"]))
        await h.settle()
        #expect(try h.queue(empty.token).map(\.appMessageID) == ["over", "c2", "n2"])
        #expect(try h.queue(empty.token).last?.collapseKey == "com.example.app")
    }

    @Test func receiptsArePerDeviceAndTTLZeroReachesOnlyOnlineOnes() async throws {
        let h = try Harness()
        let on = try await h.register(), off = try await h.register()
        _ = await subscribe(h, [on.token, off.token], to: "t")
        let device = await h.connect(on.token)
        _ = await send(h, .topic("t"), Message(messageID: "now", timeToLive: 0))
        await h.settle()
        #expect(device.ids.count == 1)
        #expect(try h.queue(off.token).isEmpty)
        _ = await send(h, .topic("t"), Message(messageID: "r", deliveryReceiptRequested: true))
        try await h.waitUntil { device.ids.count == 2 }
        h.engine.deviceAcknowledged(token: on.token, deviceMessageID: device.ids[1])
        await h.settle()
        let receipts = try h.engine.store.loadOutbound()
        #expect(receipts.map(\.token) == [on.token])
        #expect(receipts.map(\.messageID) == ["dr2:r"])
    }

    @Test func subscriptionsSurviveARestartAndGoWithAnUninstall() async throws {
        let store = Harness.newStore()
        let (kept, gone): (String, String)
        do {
            let h = try Harness(store: store)
            kept = try await h.register().token
            gone = try await h.register().token
            _ = await subscribe(h, [kept, gone], to: "t")
            try await h.engine.uninstall(token: gone)
            await h.settle()
        }
        let h = try Harness(store: store)
        #expect(h.engine.topics(token: kept, senderID: "111")?.keys.sorted() == ["t"])
        #expect(h.engine.topics(token: gone, senderID: "111") == [:])
        #expect(h.engine.topicSubscriberCounts(senderID: "111") == ["t": 1])
        _ = await send(h, .topic("t"), Message(messageID: "m"))
        await h.settle()
        #expect(try h.queue(kept).count == 1)
        #expect(try h.queue(gone).isEmpty)
        // The body outlives a restart with its rows.
        let restarted = try Harness(store: store)
        #expect(try restarted.queue(kept).first.map { try JSONValue.parse($0.payload)["from"] } == "/topics/t")
    }

    @Test func subscriptionErrorsPerToken() async throws {
        let h = try Harness()
        let mine = try await h.register(), theirs = try await h.register(senders: ["222"])
        let gone = try await h.register()
        try await h.engine.uninstall(token: gone.token)
        let results = await subscribe(h, [mine.token, theirs.token, gone.token, "no-such-token"], to: "t")
        #expect(results.map { r -> TopicSubscriptionError? in if case .failure(let e) = r { return e } else { return nil } }
                == [nil, .senderMismatch, .notFound, .notFound])
        let missing = await h.engine.unsubscribe([TopicSubscriptionChange(token: mine.token, senderID: "111")], from: "other", allowMissing: false)
        #expect(missing.map { r -> TopicSubscriptionError? in if case .failure(let e) = r { return e } else { return nil } } == [.notSubscribed])
    }

    @Test func atMost2000TopicsPerAppInstance() async throws {
        let h = try Harness()
        let d = try await h.register()
        for i in 0..<Engine.maximumTopicsPerToken {
            let r = await subscribe(h, [d.token], to: "t\(i)")
            guard case .success = r[0] else { Issue.record("topic \(i): \(r)"); return }
        }
        let over = await subscribe(h, [d.token], to: "one-more")
        #expect(over.map { r -> TopicSubscriptionError? in if case .failure(let e) = r { return e } else { return nil } } == [.tooManyTopics])
        // Subscribing again to one it has is still fine.
        let again = await subscribe(h, [d.token], to: "t0")
        guard case .success = again[0] else { Issue.record("\(again)"); return }
    }

    @Test func aFailedSubscriptionWriteIsUndone() async throws {
        let h = try Harness()
        let d = try await h.register()
        h.engine.store.injectFailures { if case .subscribe = $0 { return true } else { return false } }
        let r = await subscribe(h, [d.token], to: "t")
        #expect(r.map { r -> TopicSubscriptionError? in if case .failure(let e) = r { return e } else { return nil } } == [.internalError])
        #expect(h.engine.topics(token: d.token, senderID: "111") == [:])
    }
}
