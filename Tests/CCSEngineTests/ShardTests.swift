@testable import CCSEngine
import DeliveryCore
import Dispatch
import Locking
import PushDomain
import StoreModel
import Testing

/// The devices partitioned over shards (`Engine.Configuration.shards`): a send takes its device's
/// shard alone; what every shard holds a copy of (registry, topics, groups, senders) stays the same
/// in all of them; a path that crosses shards (a refreshed token, a fan-out) reaches every device.
@Suite struct ShardTests {
    /// Registers devices until two are on different shards.
    static func twoOnDifferentShards(_ h: Harness) async throws -> (DeviceRecord, DeviceRecord) {
        let first = try await h.register()
        while true {
            let other = try await h.register()
            if h.engine.shardIndex(of: other.token) != h.engine.shardIndex(of: first.token) { return (first, other) }
        }
    }

    @Test func aSendToADeviceOnAnotherShardDoesNotWaitForAHeldShard() async throws {
        let h = try Harness()
        let (held, other) = try await Self.twoOnDifferentShards(h)
        let device = await h.connect(other.token)
        let answered = DispatchSemaphore(value: 0)
        let outcome = Locked<Outcome?>(nil)
        // The held device's shard stays locked until the other's send is answered: with one lock
        // for both, the wait would never end (bounded, so that the test fails rather than hangs).
        let result = h.engine.shard(held.token).withLock { _ in
            DispatchQueue.global().async {
                h.engine.downstream(data("m1", to: other.token), senderID: "111") { answer in
                    outcome.withLock { $0 = answer }
                    answered.signal()
                }
            }
            return answered.wait(timeout: .now() + 60)
        }
        #expect(result == .success)
        #expect(outcome.withLock { $0 } == .ack(from: other.token))
        try await h.waitUntil { device.ids.count == 1 }
    }

    @Test func whatEveryShardHoldsStaysTheSameThroughChanges() async throws {
        let h = try Harness()
        var devices: [DeviceRecord] = []
        for _ in 0..<8 { devices.append(try await h.register()) }
        let shared = try await h.register(senders: ["111", "222"])
        _ = await h.engine.subscribe(devices.map { TopicSubscriptionChange(token: $0.token, senderID: "111") }, to: "news")
        _ = await h.engine.unsubscribe([TopicSubscriptionChange(token: devices[1].token, senderID: "111")], from: "news")
        let key = try await h.engine.manageDeviceGroup(sender: "111", .create(name: "g", tokens: devices.prefix(4).map(\.token)))
        let refreshed = try await h.engine.refreshToken(devices[2].token)
        _ = try await h.engine.setDeviceState(token: devices[3].token, foreground: false, idle: true)
        try await h.engine.uninstall(token: devices[4].token)
        _ = try await h.engine.reinstall(token: devices[5].token)
        _ = try await h.engine.reset(sender: "222")
        h.engine.provisionSender("333", key: "k")
        #expect(h.engine.device(token: refreshed.refreshedTokens.last!)?.token == devices[2].token)
        #expect(h.engine.isDeviceGroupKey(key, sender: "111") && h.engine.device(token: shared.token)?.senders == ["111"])
        let copies = h.engine.eachShard { s in Copy(s) }
        #expect(copies.count == Harness.shards)
        for copy in copies.dropFirst() { #expect(copy == copies[0]) }
    }

    /// What each shard holds alike.
    struct Copy: Equatable {
        let devices: [String: DeviceRecord], states: [String: DeviceState], aliases: [String: String]
        let apns: [String: String], byDeviceID: [String: String], senders: [String: SenderRecord]
        let topics: [TopicRegistry.Topic: Set<String>], groups: [String: DeviceGroupRecord]

        init(_ s: Engine.State) {
            (devices, states, aliases) = (s.registry.devices, s.registry.deviceStates, s.registry.aliases)
            (apns, byDeviceID, senders) = (s.registry.apnsTokens, s.registry.tokenByDeviceID, s.registry.senders)
            (topics, groups) = (s.topics.subscribers, s.groups.byID)
        }
    }

    @Test func aTokenRefreshedOntoAnotherShardStillReachesItsInstallation() async throws {
        let h = try Harness()
        let d = try await h.register()
        var record = try await h.engine.refreshToken(d.token)
        while h.engine.shardIndex(of: record.refreshedTokens.last!) == h.engine.shardIndex(of: d.token) {
            record = try await h.engine.refreshToken(d.token)
        }
        let older = record.refreshedTokens.last!
        record = try await h.engine.refreshToken(d.token)  // `older` is no longer the newest
        let device = await h.connect(d.token)
        #expect(await h.send(data("m1", to: older)) == .ack(from: older))
        try await h.waitUntil { device.ids.count == 1 }
        #expect(h.engine.shard(d.token).withLock { $0.sessions.online[d.token]?.inFlight.count } == 1)
    }

    @Test func aTopicReachesItsSubscribersOnEveryShard() async throws {
        let h = try Harness()
        var devices: [DeviceRecord] = []
        while Set(devices.map { h.engine.shardIndex(of: $0.token) }).count < Harness.shards || devices.count < 6 {
            devices.append(try await h.register())
        }
        _ = await h.engine.subscribe(devices.map { TopicSubscriptionChange(token: $0.token, senderID: "111") }, to: "news")
        var links: [FakeDevice] = []
        for d in devices { links.append(await h.connect(d.token)) }
        #expect(await h.send(data("stored", to: "/topics/news")) == .ack(from: "/topics/news"))
        try await h.waitUntil { links.allSatisfy { $0.ids.count == 1 } }
        // A time to live of 0 is handed over now, never stored: the connected members on every shard.
        #expect(await h.send(data("now", to: "/topics/news") { $0.timeToLive = 0 }) == .ack(from: "/topics/news"))
        try await h.waitUntil { links.allSatisfy { $0.ids.count == 2 } }
    }

    @Test func everyShardMintsItsOwnIDs() async throws {
        let h = try Harness()
        var devices: [DeviceRecord] = []
        while Set(devices.map { h.engine.shardIndex(of: $0.token) }).count < Harness.shards {
            devices.append(try await h.register())
        }
        var links: [FakeDevice] = []
        for d in devices { links.append(await h.connect(d.token)) }
        // The clock stands still: each shard's ids still differ from the others'.
        for d in devices { #expect(await h.send(data("m", to: d.token)) == .ack(from: d.token)) }
        let ids = links.flatMap(\.ids)
        #expect(ids.count == devices.count && Set(ids).count == ids.count)
    }
}
