@testable import CCSEngine
import DeliveryCore
import PushDomain
import StoreModel
import Testing

/// The engine as the device side's host: the links and the early writes' tickets it keeps beside the
/// core (`State.deviceLinks`, `State.earlyWrites`) live exactly as long as the core names them: a
/// connection while it is the device's, an early write while its message is in flight.
@Suite struct DeviceHostTests {
    /// Every shard's tables, added up (a device's are in its shard alone).
    static func tables(_ h: Harness) -> (links: Int, early: Int) {
        h.engine.eachShard { s in (s.sessions.online.values.filter { s.deviceLinks[$0.connection] != nil }.count,
                                   s.earlyWrites.count) }
            .reduce((0, 0)) { ($0.0 + $1.0, $0.1 + $1.1) }
    }

    @Test func aConfirmationBeforeTheWriteCallsItOffAnswersAndEmptiesTheTable() async throws {
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let d = try await h.register()
        let device = await h.connect(d.token)
        async let outcome = h.send(data("m1", to: d.token))
        try await h.waitUntil { device.ids.count == 1 }
        #expect(Self.tables(h) == (1, 1), "the held write's ticket and answer are the host's")
        h.engine.deviceAcknowledged(token: d.token, deviceMessageID: device.ids[0])
        #expect(await outcome == .ack(from: d.token), "called off: the answer comes from the confirmation")
        #expect(Self.tables(h) == (1, 0))
        await h.settle()
        #expect(try h.queue(d.token).isEmpty, "a write called off never reaches the store")
    }

    @Test func aDisconnectForgetsItsEarlyWritesWhoseCommitsStillAnswer() async throws {
        let h = try Harness()
        let d = try await h.register()
        let device = await h.connect(d.token)
        #expect(await h.send(data("m1", to: d.token)) == .ack(from: d.token), "committed: the commit answered")
        #expect(device.ids.count == 1 && Self.tables(h) == (1, 1), "in flight until the device confirms")
        h.engine.deviceDisconnected(token: d.token, link: device)
        #expect(Self.tables(h) == (0, 0))
        #expect(h.engine.shard(d.token).withLock { $0.deviceLinks.id(of: device) } == nil)
        #expect(try h.queue(d.token).map(\.deviceMessageID) == device.ids, "unconfirmed: it waits in the store")
    }

    @Test func aNewerConnectionClosesTheOlderAndOnlyItsLinkIsKept() async throws {
        let h = try Harness()
        let d = try await h.register()
        let first = await h.connect(d.token)
        let second = await h.connect(d.token)
        #expect(first.closed.load(ordering: .relaxed) && !second.closed.load(ordering: .relaxed))
        #expect(h.engine.shard(d.token).withLock { s in s.deviceLinks.id(of: first) == nil && s.isCurrent(d.token, second) })
        // The older connection's own disconnect, when it comes, changes nothing.
        h.engine.deviceDisconnected(token: d.token, link: first)
        #expect(h.engine.isOnline(token: d.token))
        #expect(await h.send(data("m1", to: d.token)) == .ack(from: d.token))
        #expect(first.ids.isEmpty && second.ids.count == 1)
    }
}
