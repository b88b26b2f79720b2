import DeliveryCore
import CCSEngine
import CCSProtocol
import PushDomain
import StoreModel
import Testing

/// Apple's store-and-forward rule (only the newest notification per app is kept) for a connected
/// device, whose notifications go live: an older one in the store is collapsed by a newer one, and a
/// device that confirms each in time leaves nothing to collapse (no collapse is written for it).
@Suite struct APNsStoreAndForwardTests {
    static let bundle = "com.example.app"

    func register(_ h: Harness) async throws -> DeviceRecord {
        try await h.engine.registerDevice(app: Self.bundle, senders: [], platform: .ios, apns: .generate)
    }

    func push(_ h: Harness, _ device: DeviceRecord, id: UInt32, priority: Priority = .high) async -> [SendResult] {
        let message = Message(messageID: String(id), priority: priority, timeToLive: 3600,
                              apns: .object(["headers": .object(["apns-priority": .string(priority == .high ? "10" : "5")]),
                                             "payload": .object(["aps": .object(["alert": .string("n\(id)")])])]))
        let request = SendRequest(sender: Self.bundle, target: .apnsDeviceToken(device.apnsToken!), message: message,
                                  origin: SendOrigin(api: .apns, clientMessageID: String(id)))
        return await withCheckedContinuation { c in h.engine.send(request) { c.resume(returning: $0) } }
    }

    static func id(_ results: [SendResult]) -> String? {
        if case .accepted(_, let id?, _)? = results.first { return id }
        return nil
    }

    /// Pushes a notification to the connected device and confirms it as soon as it arrives: its own
    /// write is called off, so only the separate collapse can remove an older one from the store.
    func pushConfirmed(_ h: Harness, _ device: DeviceRecord, _ link: FakeDevice, id: UInt32) async throws -> String? {
        let count = link.delivered.withLock { $0.count }
        let results = Task { await push(h, device, id: id) }
        try await h.waitUntil { link.delivered.withLock { $0.count } == count + 1 }
        let delivered = link.delivered.withLock { $0.last!.message.deviceMessageID }
        h.engine.deviceAcknowledged(token: device.token, deviceMessageID: delivered)
        return Self.id(await results.value)
    }

    @Test func aNotificationStoredBeforeTheDeviceConnectedIsCollapsedByALiveOne() async throws {
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let device = try await register(h)
        let first = Self.id(await push(h, device, id: 1))
        let link = await h.connect(device.token)
        #expect(link.ids == [first])  // handed over from the queue, not confirmed: still stored
        let second = try await pushConfirmed(h, device, link, id: 2)
        await h.settle()
        #expect(link.ids == [first, second])
        #expect(try h.queue(device.token).isEmpty)
    }

    @Test func aWrittenUnconfirmedNotificationIsCollapsedByTheNextOne() async throws {
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let device = try await register(h)
        let link = await h.connect(device.token)
        let first = Task { await push(h, device, id: 1) }
        try await h.waitUntil { link.delivered.withLock { $0.count } == 1 }
        await h.settle()  // someone waits for the store: the pending write is taken now
        let firstID = Self.id(await first.value)
        #expect(try h.queue(device.token).map(\.deviceMessageID) == [firstID])
        let second = try await pushConfirmed(h, device, link, id: 2)
        await h.settle()
        #expect(link.ids == [firstID, second])
        #expect(try h.queue(device.token).isEmpty)
        // The device leaves without confirming the first: nothing older than what it has comes back.
        h.engine.deviceDisconnected(token: device.token, link: link)
        let again = await h.connect(device.token)
        #expect(again.ids.isEmpty)
    }

    @Test func aNotificationHeldBackWhileConnectedIsCollapsedByTheNextLiveOne() async throws {
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let device = try await register(h)
        let link = await h.connect(device.token)
        _ = try await h.engine.setDeviceState(token: device.token, foreground: nil, idle: true)
        // Priority 5 waits while the device is idle: stored, not handed over.
        let first = Self.id(await push(h, device, id: 1, priority: .normal))
        #expect(first != nil && link.ids.isEmpty)
        #expect(try h.queue(device.token).map(\.deviceMessageID) == [first])
        // Priority 10 wakes it: handed over at once, and the held one is collapsed.
        let second = Task { await push(h, device, id: 2) }
        try await h.waitUntil { link.delivered.withLock { $0.count } == 1 }
        let secondID = link.delivered.withLock { $0[0].message.deviceMessageID }
        h.engine.deviceAcknowledged(token: device.token, deviceMessageID: secondID)
        #expect(Self.id(await second.value) == secondID)
        await h.settle()
        #expect(try h.queue(device.token).isEmpty)
        _ = try await h.engine.setDeviceState(token: device.token, foreground: nil, idle: false)
        await h.settle()
        #expect(link.ids == [secondID])  // the held one never comes
    }

    @Test func notificationsConfirmedInTimeWriteNothingAtAll() async throws {
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let device = try await register(h)
        let link = await h.connect(device.token)
        let before = h.engine.committer.statistics
        for n in 1...5 {
            let results = Task { await push(h, device, id: UInt32(n)) }
            try await h.waitUntil { link.delivered.withLock { $0.count } == n }
            let id = link.delivered.withLock { $0.last!.message.deviceMessageID }
            h.engine.deviceAcknowledged(token: device.token, deviceMessageID: id)
            #expect(Self.id(await results.value) == id)
        }
        await h.settle()
        let after = h.engine.committer.statistics
        #expect(after.cancellableCalledOff - before.cancellableCalledOff == 5)
        #expect(after.ops == before.ops)  // no write, and no collapse that would have found nothing
        #expect(try h.queue(device.token).isEmpty)
    }

    @Test func aNotificationOnTheConnectionWhoseWriteIsPendingStillCollapses() async throws {
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let device = try await register(h)
        let link = await h.connect(device.token)
        let before = h.engine.committer.statistics
        let first = Task { await push(h, device, id: 1) }
        try await h.waitUntil { link.delivered.withLock { $0.count } == 1 }
        // Not confirmed: its write may still be taken, so the next one submits the collapse.
        let second = Task { await push(h, device, id: 2) }
        try await h.waitUntil { link.delivered.withLock { $0.count } == 2 }
        for d in link.delivered.withLock({ $0 }) { h.engine.deviceAcknowledged(token: device.token, deviceMessageID: d.message.deviceMessageID) }
        _ = await (first.value, second.value)
        await h.settle()
        let after = h.engine.committer.statistics
        #expect(after.ops - before.ops == 1)  // the collapse, found nothing: both writes were called off
        #expect(try h.queue(device.token).isEmpty)
    }
}
