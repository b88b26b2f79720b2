@testable import CCSEngine
import DeliveryCore
import CCSProtocol
import PushDomain
import Testing

@Suite struct DeviceMessageRateTests {
    @Test func parsesFCMAndWindows() throws {
        #expect(MessageRate(parsing: "fcm") == .fcm)
        #expect(MessageRate(parsing: "fcm", fcm: .fcmProject)?.description == "600000/min")
        #expect(MessageRate.fcm.description == "240/min,5000/h")
        let rate = try #require(MessageRate(parsing: "3/10s,100/h,7/d,1000000/90min"))
        #expect(rate.windows.map(\.limit) == [3, 100, 7, 1_000_000])
        #expect(rate.windows.map(\.periodMillis) == [10_000, 3_600_000, 86_400_000, 5_400_000])
        #expect(rate.description == "3/10s,100/h,7/d,1000000/90min")
        #expect(MessageRate(parsing: "1/60s")?.description == "1/min")
    }

    @Test(arguments: ["", "off", "3", "3/", "/min", "0/min", "-1/min", "3/0s", "3/x", "3/min,", "1000001/min",
                      "3/2d", "3/0.5s", "3/999999999999999999999s", "99999999999999999999/min",
                      "1/s,1/s,1/s,1/s,1/s", "3/ min", "3/s/s"])
    func refusesWhatIsNotALimit(_ text: String) {
        #expect(MessageRate(parsing: text) == nil)
    }

    @Test func aBucketRefillsAtItsRateAndSaysWhenThereIsRoom() throws {
        var limiter = RateLimiter(rate: try #require(MessageRate(parsing: "3/min")))
        let t0: Int64 = 1_700_000_000_000
        for _ in 0..<3 { #expect(limiter.admit("a", now: t0) == nil) }
        // The fourth waits for one message's worth of refill: a third of a minute.
        #expect(limiter.admit("a", now: t0) == 20_000)
        #expect(limiter.admit("a", now: t0 + 19_999) == 1)
        #expect(limiter.admit("a", now: t0 + 20_000) == nil)
        #expect(limiter.admit("a", now: t0 + 20_000) == 20_000)
        // Another device has its own count.
        #expect(limiter.admit("b", now: t0) == nil)
        // A whole period refills to the limit, never past it.
        for _ in 0..<3 { #expect(limiter.admit("a", now: t0 + 10 * 60_000) == nil) }
        #expect(limiter.admit("a", now: t0 + 10 * 60_000) != nil)
    }

    @Test func everyWindowMustHaveRoom() throws {
        var limiter = RateLimiter(rate: try #require(MessageRate(parsing: "2/s,3/min")))
        let t0: Int64 = 1_000_000
        #expect(limiter.admit("a", now: t0) == nil)
        #expect(limiter.admit("a", now: t0) == nil)
        #expect(limiter.admit("a", now: t0) == 500)  // the second's window: half a second
        #expect(limiter.admit("a", now: t0 + 1000) == nil)
        // The minute's window is spent: 20 s until a third of it is back.
        #expect(limiter.admit("a", now: t0 + 2000) == 18_000)
    }

    @Test func aClockSetBackRefillsNothing() throws {
        var limiter = RateLimiter(rate: try #require(MessageRate(parsing: "1/min")))
        #expect(limiter.admit("a", now: 100_000) == nil)
        #expect(limiter.admit("a", now: 40_000) == 60_000)
        #expect(limiter.admit("a", now: 160_000) == nil)
    }

    @Test func fullBucketsAreForgotten() throws {
        var limiter = RateLimiter(rate: try #require(MessageRate(parsing: "5/s")))
        for i in 0..<100 { _ = limiter.admit("d\(i)", now: 0) }
        #expect(limiter.trackedKeys == 100)
        for i in 0..<RateLimiter.pruneEvery { _ = limiter.admit("late", now: 10_000 + Int64(i)) }
        #expect(limiter.trackedKeys == 1)
    }

    @Test func theEngineRefusesOverTheLimitAndCountsNoDryRun() async throws {
        var configuration = Engine.Configuration()
        configuration.deviceMessageRate = MessageRate(parsing: "2/min")
        let h = try Harness(configuration: configuration)
        let device = try await h.register()
        let other = try await h.register()
        #expect(await h.send(data("dry", to: device.token) { $0.dryRun = true }) == .ack(from: device.token))
        #expect(await h.send(data("m1", to: device.token)) == .ack(from: device.token))
        #expect(await h.send(data("m2", to: device.token)) == .ack(from: device.token))
        #expect(await h.send(data("m3", to: device.token)) ==
                .nack(.deviceMessageRateExceeded(token: device.token, retryAfterMillis: 30_000)))
        #expect(await h.send(data("o1", to: other.token)) == .ack(from: other.token))
        // An unknown token is refused for what it is, not counted.
        #expect(await h.send(data("x", to: "no-such-token")) == .nack(.invalidRegistration(token: "no-such-token")))
        h.clock.advance(byMillis: 30_000)
        #expect(await h.send(data("m4", to: device.token)) == .ack(from: device.token))
        #expect(try h.queue(device.token).map(\.appMessageID) == ["m1", "m2", "m4"])
    }

    @Test func withoutALimitNothingIsCounted() async throws {
        let h = try Harness()
        let device = try await h.register()
        for i in 0..<300 { #expect(await h.send(data("m\(i)", to: device.token) { $0.timeToLive = 0 }) == .ack(from: device.token)) }
    }
}

@Suite struct TopicMessageRateTests {
    func send(_ h: Harness, _ target: Target, _ id: String, sender: String = "111", dryRun: Bool = false) async -> SendResult {
        var message = Message(messageID: id, data: ["k": "v"])
        message.dryRun = dryRun
        return await withCheckedContinuation { c in
            h.engine.send(SendRequest(sender: sender, target: target, message: message)) { c.resume(returning: $0[0]) }
        }
    }

    func isFannedOut(_ result: SendResult) -> Bool {
        if case .fannedOut = result { true } else { false }
    }

    @Test func thereIsNoFCMPresetForTopics() {
        #expect(MessageRate(parsing: "fcm", fcm: nil) == nil)
        #expect(MessageRate(parsing: "2/min", fcm: nil)?.description == "2/min")
    }

    @Test func severalKeysAreAdmittedAllOrNone() throws {
        var limiter = RateLimiter(rate: try #require(MessageRate(parsing: "2/min")))
        #expect(limiter.admit(["a"], now: 0) == nil)
        #expect(limiter.admit(["a"], now: 0) == nil)
        // "a" is spent: neither is counted, and "b" still has both of its messages.
        #expect(limiter.admit(["b", "a"], now: 0) == 30_000)
        #expect(limiter.admit(["b"], now: 0) == nil)
        #expect(limiter.admit(["b"], now: 0) == nil)
        #expect(limiter.admit(["b"], now: 0) == 30_000)
        // A key named twice is counted once.
        #expect(limiter.admit(["c", "c"], now: 0) == nil)
        #expect(limiter.admit(["c"], now: 0) == nil)
    }

    @Test func aSendersTopicIsRefusedOverTheLimitAndConditionsCountEachTopic() async throws {
        var configuration = Engine.Configuration()
        configuration.topicMessageRate = MessageRate(parsing: "2/min", fcm: nil)
        let h = try Harness(configuration: configuration)
        let device = try await h.register()
        _ = await h.engine.subscribe([TopicSubscriptionChange(token: device.token, senderID: "111")], to: "news")
        #expect(isFannedOut(await send(h, .topic("news"), "dry", dryRun: true)))
        #expect(isFannedOut(await send(h, .topic("news"), "m1")))
        #expect(isFannedOut(await send(h, .condition("'news' in topics || 'sport' in topics"), "c1")))
        #expect(await send(h, .topic("news"), "m2") == .refused(.topicsMessageRateExceeded(topic: "news", retryAfterMillis: 30_000)))
        let condition = "'news' in topics && 'weather' in topics"
        #expect(await send(h, .condition(condition), "c2") ==
                .refused(.topicsMessageRateExceeded(topic: condition, retryAfterMillis: 30_000)))
        // Another topic, and the same topic of another sender, have their own counts; the refused
        // condition counted nothing against "weather".
        for i in 0..<2 { #expect(isFannedOut(await send(h, .topic("weather"), "w\(i)"))) }
        #expect(isFannedOut(await send(h, .topic("news"), "s1", sender: "222")))
        h.clock.advance(byMillis: 30_000)
        #expect(isFannedOut(await send(h, .topic("news"), "m3")))
        await h.settle()
        #expect(try h.queue(device.token).map(\.appMessageID) == ["m1", "c1", "m3"])
    }
}
