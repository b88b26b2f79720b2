@testable import CCSEngine
import CCSProtocol
import PushDomain
import StoreModel
import Foundation
import Locking
import Synchronization
import Testing

/// The delivery promise where the engine could break it (issue 39): completions that re-entered its
/// lock once the writer stopped, a failed backlog read taken as an empty queue, and a device channel
/// without a window.
@Suite struct DeliveryPromiseTests {
    func sendGroup(_ h: Harness, _ key: String, _ id: String) async -> [SendResult] {
        await withCheckedContinuation { c in
            h.engine.send(SendRequest(sender: "111", target: .token(key), message: Message(messageID: id, data: ["id": id]))) {
                c.resume(returning: $0)
            }
        }
    }

    // MARK: a stopped writer (item 10)

    /// The last member's write is refused by the stopped writer; the answer it completes prunes the
    /// dead member under the engine's lock, which the write's submission held.
    @Test func aGroupSendWithADeadMemberAfterTheWriterStoppedIsAnswered() async throws {
        let h = try Harness()
        let dead = try await h.register(), alive = try await h.register()
        let key = try await h.engine.manageDeviceGroup(sender: "111", .create(name: "g", tokens: [dead.token, alive.token]))
        try await h.engine.uninstall(token: dead.token)
        h.engine.committer.shutdownBlocking()
        let results = await sendGroup(h, key, "m1")
        guard case .group(let outcome)? = results.first else { Issue.record("no group answer: \(results)"); return }
        #expect(outcome.success == 0)
        #expect(outcome.failed.map(\.error) == [.unregistered(token: dead.token), .unavailable])
    }

    /// An app server's ACK in a cluster submits the removal inside the engine's lock, with a
    /// completion that takes it.
    @Test func anAppServerAckInAClusterAfterTheWriterStoppedReturns() async throws {
        let h = try Harness(cluster: FakeCluster(nodeID: "a", partnerNode: "b"))
        let d = try await h.register()
        let server = h.appServer(id: "c1")
        #expect(await h.upstream(d.token, ["message_id": "u1", "to": "111@gcm.googleapis.com"]) == .sent(messageID: "u1"))
        try await h.waitUntil { server.ids == ["u1"] }
        h.engine.committer.shutdownBlocking()
        h.engine.appServerAcknowledged(connectionID: "c1", messageID: "u1")
        #expect(h.engine.outbound().isEmpty)
    }

    // MARK: the backlog read (item 11)

    /// A read that fails is not "nothing stored": the connection is not marked loaded (a message
    /// sent meanwhile is stored, not handed over ahead of the stored one), and it is closed so that
    /// the device connects again and gets its whole queue.
    @Test func aFailedBacklogReadIsNeverTakenAsAnEmptyQueue() async throws {
        let h = try Harness()
        let d = try await h.register()
        #expect(await h.send(data("stored", to: d.token)) == .ack(from: d.token))
        h.engine.store.injectReadFailures(true)
        let first = FakeDevice()
        h.engine.deviceConnected(token: d.token, link: first)
        await h.settle()
        #expect(await h.send(data("later", to: d.token)) == .ack(from: d.token))
        #expect(first.ids.isEmpty)
        try await h.waitUntil { first.closed.load(ordering: .relaxed) }
        h.engine.store.injectReadFailures(false)
        h.engine.deviceDisconnected(token: d.token, link: first)
        let again = await h.connect(d.token)
        #expect(again.payloads.map { $0["data"]?["id"] } == [.string("stored"), .string("later")])
    }

    // MARK: the device window (item 12)

    /// A device that reads and never ACKs: 100,000 messages to it hold at most the window (100 by
    /// default) in memory; the rest wait in the store under its rules (the 100-message limit, on
    /// what waits besides the window, and its `deleted_messages` notice).
    /// Past the window messages wait in the store, and nothing overtakes them: a message sent while
    /// the window holds some back is stored behind them, and each refill hands them over in order.
    @Test func whatTheWindowHoldsBackGoesOutInOrderAsTheDeviceAcks() async throws {
        var configuration = Engine.Configuration()
        configuration.deviceWindow = 2
        let h = try Harness(configuration: configuration)
        let d = try await h.register()
        let device = await h.connect(d.token)
        for i in 0..<4 { #expect(await h.send(data("m\(i)", to: d.token)) == .ack(from: d.token)) }
        #expect(device.ids.count == 2)
        h.engine.deviceAcknowledged(token: d.token, deviceMessageID: device.ids[0])
        try await h.waitUntil { device.ids.count == 3 }
        #expect(await h.send(data("m4", to: d.token)) == .ack(from: d.token))
        await h.settle()
        #expect(device.ids.count == 3)
        #expect(h.engine.handedOverUnacknowledged(token: d.token) == 2)
        for id in device.ids[1...2] { h.engine.deviceAcknowledged(token: d.token, deviceMessageID: id) }
        try await h.waitUntil { device.ids.count == 5 }
        #expect(device.payloads.map { $0["data"]?["id"] } == (0..<5).map { .string("m\($0)") })
    }

    /// A device slow to ACK loses nothing to the 100-message limit while what waits fits it: the
    /// rows of its full window are not counted against it.
    @Test func aFullWindowDoesNotCountAgainstTheStoredLimit() async throws {
        let h = try Harness()
        let d = try await h.register()
        let device = await h.connect(d.token)
        for i in 0..<150 { #expect(await h.send(data("m\(i)", to: d.token)) == .ack(from: d.token)) }
        #expect(device.ids.count == 100)
        #expect(try h.queue(d.token).count == 150)
        for id in device.ids { h.engine.deviceAcknowledged(token: d.token, deviceMessageID: id) }
        try await h.waitUntil { device.ids.count == 150 }
        #expect(device.payloads.map { $0["data"]?["id"] } == (0..<150).map { .string("m\($0)") })
    }

    @Test func aDeviceThatNeverAcksHoldsAtMostTheWindowThrough100000Sends() async throws {
        let h = try Harness()
        let d = try await h.register()
        let device = await h.connect(d.token)
        let window = 100
        let total = 100_000, chunk = 5_000
        for start in stride(from: 0, to: total, by: chunk) {
            await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
                let left = Atomic<Int>(chunk)
                for i in start..<(start + chunk) {
                    h.engine.downstream(data("m\(i)", to: d.token), senderID: "111") { _ in
                        if left.subtract(1, ordering: .relaxed).newValue == 0 { cont.resume() }
                    }
                }
            }
            try #require(h.engine.handedOverUnacknowledged(token: d.token) <= window)
            try #require(device.ids.count <= window)
            // The window's rows, at most 100 more waiting, and the notice.
            try #require(try h.queue(d.token).count <= window + 100 + 1)
        }
        #expect(device.ids.count == window)
        // ACKed, the window takes what the store kept: the notice of what the limit discarded first.
        for id in device.ids { h.engine.deviceAcknowledged(token: d.token, deviceMessageID: id) }
        try await h.waitUntil(seconds: 30) {
            device.payloads.contains { $0["message_type"] == .string("deleted_messages") }
        }
        #expect(h.engine.handedOverUnacknowledged(token: d.token) <= window)
    }
}
