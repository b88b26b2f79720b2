@testable import CCSEngine
import DeliveryCore
import CCSProtocol
import Testing

@Suite struct CollapsibleThrottleTests {
    @Test func parsesFCMAndItsOwnNumbers() throws {
        #expect(CollapsibleThrottleRate(parsing: "fcm") == .fcm)
        #expect(CollapsibleThrottleRate.fcm.description == "20,1/3min")
        let rate = try #require(CollapsibleThrottleRate(parsing: "5,1/10s"))
        #expect(rate.burst == 5 && rate.refillMillis == 10_000 && rate.description == "5,1/10s")
    }

    @Test(arguments: ["", "off", "20", "20,", "20,3min", "20,2/3min", "0,1/min", "1001,1/min", "20,1/0s", "20,1/2d",
                      "20,1/min,1/h", "-1,1/min", "99999999999999999999,1/min", "20/3min"])
    func refusesWhatIsNotAThrottle(_ text: String) {
        #expect(CollapsibleThrottleRate(parsing: text) == nil)
    }

    /// `t.admit(token, now:)` `times` times (a mutating call cannot sit inside `#expect`).
    static func admits(_ t: inout CollapsibleThrottle, _ token: String, now: Int64, times: Int = 1) -> [Bool] {
        (0..<times).map { _ in t.admit(token, now: now) }
    }

    @Test func aBurstThenOneBackPerPeriod() throws {
        var t = CollapsibleThrottle(rate: try #require(CollapsibleThrottleRate(parsing: "3,1/min")))
        let t0: Int64 = 1_000_000
        #expect(Self.admits(&t, "a", now: t0, times: 4) == [true, true, true, false])
        #expect(t.nextRefillMillis("a", now: t0) == t0 + 60_000)
        #expect(Self.admits(&t, "a", now: t0 + 59_999) == [false])
        #expect(Self.admits(&t, "a", now: t0 + 60_000, times: 2) == [true, false])
        // Another device has its own bucket; a long pause refills to the burst, never past it.
        #expect(Self.admits(&t, "b", now: t0) == [true])
        #expect(Self.admits(&t, "a", now: t0 + 3_600_000, times: 4) == [true, true, true, false])
        // A clock read that went back refills nothing.
        #expect(Self.admits(&t, "a", now: t0) == [false])
    }

    @Test func heldMessagesAreTheNewestPerKeyAndAnnouncedOnce() throws {
        var t = CollapsibleThrottle(rate: .fcm)
        let announced = [t.hold("a", collapseKey: "score", id: "1"), t.hold("a", collapseKey: "score", id: "1"),
                         t.hold("a", collapseKey: "score", id: "2"), t.hold("a", collapseKey: "news", id: "3")]
        #expect(announced == [true, false, true, true])
        #expect(Set(t.heldIDs("a")) == ["2", "3"])
        t.keep("a", ids: ["2"])
        #expect(t.heldIDs("a") == ["2"])
        t.release("a", collapseKey: "score")
        #expect(t.heldIDs("a").isEmpty && t.held.isEmpty)
    }

    @Test func dueNamesHoldingDevicesWithRoomAndPruneForgetsFullBuckets() throws {
        var t = CollapsibleThrottle(rate: try #require(CollapsibleThrottleRate(parsing: "1,1/min")))
        #expect(Self.admits(&t, "a", now: 0) == [true] && Self.admits(&t, "b", now: 0) == [true])
        _ = t.hold("a", collapseKey: "k", id: "1")
        #expect(t.due(now: 59_999).isEmpty)
        #expect(t.due(now: 60_000) == ["a"])
        t.prune(now: 60_000)
        #expect(t.buckets.keys.sorted() == ["a"])
        t.forget("a")
        t.prune(now: 60_000)
        #expect(t.buckets.isEmpty)
    }

    /// FCM's numbers on the engine's virtual clock: 20 collapsible messages go at once, the next are
    /// held (stored, the newest per collapse key), and one goes 3 minutes later.
    @Test func theEngineHoldsBackPastTheBurstAndReleasesOnTheClock() async throws {
        var configuration = Engine.Configuration()
        configuration.collapsibleThrottle = .fcm
        let h = try Harness(configuration: configuration)
        let d = try await h.register()
        let device = await h.connect(d.token)
        for i in 0..<20 {
            #expect(await h.send(data("m\(i)", to: d.token) { $0.collapseKey = "k\(i % 4)" }) == .ack(from: d.token))
        }
        #expect(device.ids.count == 20)
        for id in device.ids { h.engine.deviceAcknowledged(token: d.token, deviceMessageID: id) }
        // Past the burst: accepted (not refused), held back; the newer of the same key replaces the older.
        #expect(await h.send(data("late1", to: d.token) { $0.collapseKey = "score" }) == .ack(from: d.token))
        #expect(await h.send(data("late2", to: d.token) { $0.collapseKey = "score" }) == .ack(from: d.token))
        // A non-collapsible message is not throttled.
        #expect(await h.send(data("plain", to: d.token)) == .ack(from: d.token))
        try await h.waitUntil { device.ids.count == 21 }
        await h.settle()
        let held = try h.queue(d.token).filter { $0.collapseKey == "score" }
        #expect(held.count == 1 && held[0].appMessageID == "late2")
        #expect(h.engine.throttledMessageIDs(token: d.token) == [held[0].deviceMessageID])
        _ = try await h.engine.advanceClock(byMillis: 179_999)
        await h.settle()
        #expect(device.ids.count == 21)
        _ = try await h.engine.advanceClock(byMillis: 1)
        try await h.waitUntil { device.ids.count == 22 }
        #expect(device.ids.last == held[0].deviceMessageID)
        #expect(h.engine.throttledMessageIDs(token: d.token).isEmpty)
    }

    /// A device that leaves holds nothing throttled (its queue waits as any stored queue); connected
    /// again with its bucket still empty, the message is held again, and goes at the refill.
    @Test func aReconnectedDeviceIsThrottledAgainUntilTheRefill() async throws {
        var configuration = Engine.Configuration()
        configuration.collapsibleThrottle = CollapsibleThrottleRate(parsing: "1,1/min")
        let h = try Harness(configuration: configuration)
        let d = try await h.register()
        let first = await h.connect(d.token)
        #expect(await h.send(data("a", to: d.token) { $0.collapseKey = "k" }) == .ack(from: d.token))
        #expect(first.ids.count == 1)
        h.engine.deviceAcknowledged(token: d.token, deviceMessageID: first.ids[0])
        #expect(await h.send(data("b", to: d.token) { $0.collapseKey = "k" }) == .ack(from: d.token))
        await h.settle()
        #expect(h.engine.throttledMessageIDs(token: d.token).count == 1)
        h.engine.deviceDisconnected(token: d.token, link: first)
        #expect(h.engine.throttledMessageIDs(token: d.token).isEmpty)
        let second = await h.connect(d.token)
        #expect(second.ids.isEmpty && h.engine.throttledMessageIDs(token: d.token).count == 1)
        _ = try await h.engine.advanceClock(byMillis: 60_000)
        try await h.waitUntil { second.ids.count == 1 }
        #expect(second.payloads.first?["data"]?["id"] == "b")
    }

    /// "Now or never": a message with a time to live of 0 that the throttle holds back is not stored.
    @Test func aTimeToLiveOfZeroPastTheBurstIsDropped() async throws {
        var configuration = Engine.Configuration()
        configuration.collapsibleThrottle = CollapsibleThrottleRate(parsing: "1,1/min")
        let h = try Harness(configuration: configuration)
        let d = try await h.register()
        let device = await h.connect(d.token)
        for id in ["a", "b"] {
            #expect(await h.send(data(id, to: d.token) { $0.collapseKey = "k"; $0.timeToLive = 0 }) == .ack(from: d.token))
        }
        await h.settle()
        #expect(device.ids.count == 1)
        #expect(try h.queue(d.token).allSatisfy { $0.appMessageID != "b" })
        _ = try await h.engine.advanceClock(byMillis: 60_000)
        await h.settle()
        #expect(device.ids.count == 1)
    }
}
