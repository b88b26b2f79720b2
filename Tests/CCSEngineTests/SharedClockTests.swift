import CCSEngine
import StoreModel
import Testing

/// A cluster's nodes share the virtual clock: another node's advance moves this one forward, never back.
@Suite struct SharedClockTests {
    @Test func anotherNodesAdvanceMovesTheClockForwardAndExpiresWhatItShould() async throws {
        let h = try Harness()
        let d = try await h.register()
        _ = await h.send(data("short", to: d.token) { $0.timeToLive = 60 })
        _ = await h.send(data("long", to: d.token) { $0.timeToLive = 3600 })
        let start = h.clock.nowMillis()
        h.engine.clusterRegistryChanged(.clock(millis: start + 61_000))
        #expect(h.clock.nowMillis() == start + 61_000)
        await h.settle()
        #expect(try h.queue(d.token).map(\.appMessageID) == ["long"])
        // An older announcement (this node has moved on since) takes nothing back.
        h.engine.clusterRegistryChanged(.clock(millis: start + 1000))
        #expect(h.clock.nowMillis() == start + 61_000)
    }

    @Test func theClockMovesOnlyForwardAndNeverPastItsLimit() {
        let clock = VirtualClock(startMillis: 5000)
        #expect(clock.advance(toMillis: 7000) && clock.nowMillis() == 7000)
        #expect(!clock.advance(toMillis: 7000) && !clock.advance(toMillis: 6000) && clock.nowMillis() == 7000)
        #expect(!clock.advance(toMillis: VirtualClock.maximumMillis + 1) && clock.nowMillis() == 7000)
        #expect(!clock.advance(toMillis: -1))
    }
}
