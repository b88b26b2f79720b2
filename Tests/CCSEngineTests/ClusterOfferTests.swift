import CCSEngine
import CCSProtocol
import StoreModel
import Foundation
import Locking
import Testing

/// "Confirmed before written" across nodes (docs/scaling.md): node A takes the app server's message,
/// node B holds the device. Two engines on one database, wired by `FakeCluster`.
@Suite struct ClusterOfferTests {
    struct Nodes {
        let a: Harness, b: Harness
        let toB: FakeCluster, toA: FakeCluster
        let token: String
        let device: FakeDevice
    }

    /// A's live-write delay is `delay`: an hour, so that a confirmation never misses it, or zero,
    /// so that the write is taken at once.
    func nodes(delay: Duration) async throws -> Nodes {
        let store = Harness.newStore()
        let toB = FakeCluster(nodeID: "a", partnerNode: "b")
        let toA = FakeCluster(nodeID: "b", partnerNode: "a", messageIDSlot: 1)
        let a = try Harness(store: store, liveWriteDelay: delay, cluster: toB)
        let d = try await a.register()
        // B reads the registration at start (its registry is loaded from the shared store).
        let b = try Harness(store: store, liveWriteDelay: .seconds(3600), cluster: toA)
        toB.partner.withLock { $0.engine = b.engine }
        toA.partner.withLock { $0.engine = a.engine }
        let device = await b.connect(d.token)
        _ = toB.partnerHolds.withLock { $0.insert(d.token) }
        return Nodes(a: a, b: b, toB: toB, toA: toA, token: d.token, device: device)
    }

    /// Issue 39, item 4: two nodes on one virtual clock (it stands still) each take a message for one
    /// offline device. Each node mints ids of its own, so both are stored and both senders ACKed;
    /// before, both got the same id and the second write replaced the first.
    @Test func twoNodesNeverMintTheSameIdForOneDevice() async throws {
        let store = Harness.newStore()
        let a = try Harness(store: store, cluster: FakeCluster(nodeID: "a", partnerNode: "b", messageIDSlot: 0))
        let d = try await a.register()
        let b = try Harness(store: store, cluster: FakeCluster(nodeID: "b", partnerNode: "a", messageIDSlot: 1))
        for i in 0..<4 {
            #expect(await a.send(data("a\(i)", to: d.token)) == .ack(from: d.token))
            #expect(await b.send(data("b\(i)", to: d.token)) == .ack(from: d.token))
        }
        let queued = try a.queue(d.token)
        #expect(Set(queued.map(\.appMessageID)) == Set((0..<4).flatMap { ["a\($0)", "b\($0)"] }))
        #expect(Set(queued.map(\.deviceMessageID)).count == 8)
    }

    /// Issue 39, item 4: the device's node tells messages apart by more than their id. A different
    /// message that comes under the id of one the device confirmed (minted again by a node that
    /// restarted into the same slot on a virtual clock) is handed over, not skipped, and not removed.
    @Test func aDifferentMessageUnderAConfirmedIdIsHandedOverNotSkipped() async throws {
        let n = try await nodes(delay: .seconds(3600))
        n.a.engine.downstream(data("m1", to: n.token), senderID: "111") { _ in }
        let first = n.device.delivered.withLock { $0 }.map(\.message)
        #expect(first.count == 1)
        n.b.engine.deviceAcknowledged(token: n.token, deviceMessageID: first[0].deviceMessageID)
        await n.a.settle()
        var other = first[0]
        other.appMessageID = "m2"
        other.payload = #"{"data":{"id":"m2"}}"#
        n.b.engine.clusterMessageCommitted(other)
        await n.b.settle()
        #expect(n.device.delivered.withLock { $0 }.map(\.message.appMessageID) == ["m1", "m2"])
        // The same message announced again is still not handed over twice.
        n.b.engine.clusterMessageCommitted(other)
        n.b.engine.clusterMessageCommitted(first[0])
        await n.b.settle()
        #expect(n.device.ids.count == 2)
    }

    /// Issue 39, item 5: an offer replayed long after it was made (a sealed NOTIFY payload recorded and
    /// sent again) is not handed over; a fresh one is.
    @Test func anOutOfDateOfferIsNotHandedOver() async throws {
        let n = try await nodes(delay: .seconds(3600))
        n.toB.holdOffers.store(true, ordering: .relaxed)
        n.a.engine.downstream(data("m1", to: n.token), senderID: "111") { _ in }
        let offered = n.toB.heldOffers.withLock { $0 }
        #expect(offered.count == 1)
        let now = n.b.clock.nowMillis()
        var replayed = offered[0]
        replayed.enqueuedAt = now - 61_000  // over a minute ago (`Engine.offerFreshnessMillis`)
        n.b.engine.clusterLiveOffered([replayed], from: "a")
        #expect(n.device.ids.isEmpty)
        n.toB.releaseHeldOffers()
        #expect(n.device.ids == [offered[0].deviceMessageID])
    }

    @Test func aMessageForADeviceOnAnotherNodeIsOfferedAndItsWriteCalledOffByTheConfirmation() async throws {
        let n = try await nodes(delay: .seconds(3600))
        let before = n.a.engine.committer.statistics
        let outcome = Locked<Outcome?>(nil)
        n.a.engine.downstream(data("m1", to: n.token), senderID: "111") { o in outcome.withLock { $0 = o } }
        // On the device before anything is written; the sender waits for the confirmation.
        #expect(n.device.ids.count == 1)
        #expect(outcome.withLock { $0 } == nil)
        #expect(try n.a.engine.queuedMessages(token: n.token).map(\.appMessageID) == ["m1"])
        n.b.engine.deviceAcknowledged(token: n.token, deviceMessageID: n.device.ids[0])
        #expect(outcome.withLock { $0 } == .ack(from: n.token))
        await n.a.settle()
        await n.b.settle()
        #expect(try n.a.queue(n.token).isEmpty)
        #expect(n.a.engine.committer.statistics.cancellableCalledOff == before.cancellableCalledOff + 1)
        #expect(n.a.engine.committer.statistics.cancellableCommitted == before.cancellableCommitted)
        #expect(try n.a.engine.queuedMessages(token: n.token).isEmpty)
    }

    /// The offer submits its write inside the engine's lock with a completion that takes it: once
    /// the writer has stopped, the completion must not run inside the submission (issue 39, item 10).
    @Test func anOfferAfterTheWriterStoppedIsAnsweredUnavailable() async throws {
        let n = try await nodes(delay: .seconds(3600))
        n.a.engine.committer.shutdownBlocking()
        #expect(await n.a.send(data("m1", to: n.token)) == .nack(.unavailable))
    }

    @Test func aWriteTakenBeforeTheConfirmationIsRemovedByTheOfferingNodeWhenTheConfirmationComes() async throws {
        let n = try await nodes(delay: .zero)
        n.toB.holdOffers.store(true, ordering: .relaxed)
        // The write goes first: the sender is answered on its commit, as for any stored message.
        #expect(await n.a.send(data("m1", to: n.token)) == .ack(from: n.token))
        let stored = try n.a.queue(n.token)
        #expect(stored.map(\.appMessageID) == ["m1"])
        // Then the offer arrives and the device confirms it: nothing is left to call off, so A removes it.
        n.toB.releaseHeldOffers()
        #expect(n.device.ids == [stored[0].deviceMessageID])
        n.b.engine.deviceAcknowledged(token: n.token, deviceMessageID: stored[0].deviceMessageID)
        #expect(n.toA.confirmations.withLock { $0 } == [stored[0].deviceMessageID])
        await n.a.settle()
        #expect(try n.a.queue(n.token).isEmpty)
        // The commit's announcement reaching B afterwards hands nothing over again.
        n.b.engine.clusterMessageCommitted(stored[0])
        await n.b.settle()
        #expect(n.device.ids.count == 1)
    }

    @Test func aWrittenOfferWhoseConfirmationIsLostIsRemovedByTheDevicesNodeWhenItsCommitIsAnnounced() async throws {
        let n = try await nodes(delay: .zero)
        n.toB.holdOffers.store(true, ordering: .relaxed)
        n.toA.deliverConfirmations.store(false, ordering: .relaxed)
        #expect(await n.a.send(data("m1", to: n.token)) == .ack(from: n.token))
        let stored = try n.a.queue(n.token)
        n.toB.releaseHeldOffers()
        n.b.engine.deviceAcknowledged(token: n.token, deviceMessageID: stored[0].deviceMessageID)
        await n.a.settle()
        #expect(try n.a.queue(n.token).count == 1)
        // The commit's announcement reaches B last: the device has the message, so B removes it.
        n.b.engine.clusterMessageCommitted(stored[0])
        await n.b.settle()
        #expect(try n.a.queue(n.token).isEmpty)
        #expect(n.device.ids.count == 1)
    }

    @Test func aCommitAnnouncedWhileTheOfferIsOnTheDeviceMakesItsConfirmationARemoval() async throws {
        let n = try await nodes(delay: .zero)
        n.toB.holdOffers.store(true, ordering: .relaxed)
        #expect(await n.a.send(data("m1", to: n.token)) == .ack(from: n.token))
        let stored = try n.a.queue(n.token)
        n.toB.releaseHeldOffers()
        #expect(n.device.ids.count == 1)
        n.b.engine.clusterMessageCommitted(stored[0])
        #expect(n.device.ids.count == 1)  // not handed over twice
        n.b.engine.deviceAcknowledged(token: n.token, deviceMessageID: stored[0].deviceMessageID)
        await n.b.settle()
        #expect(try n.a.queue(n.token).isEmpty)
        #expect(n.toA.confirmations.withLock { $0 }.isEmpty)
    }

    @Test func aMessageWithATimeToLiveOfZeroReachesADeviceOnAnotherNode() async throws {
        let n = try await nodes(delay: .seconds(3600))
        let outcome = Locked<Outcome?>(nil)
        n.a.engine.downstream(data("now", to: n.token) { $0.timeToLive = 0 }, senderID: "111") { o in outcome.withLock { $0 = o } }
        #expect(n.device.delivered.withLock { $0.map(\.message.appMessageID) } == ["now"])
        n.b.engine.deviceAcknowledged(token: n.token, deviceMessageID: n.device.ids[0])
        #expect(outcome.withLock { $0 } == .ack(from: n.token))
    }

    @Test func whatTheDevicesNodeWouldNotHandOverNowGoesTheDurableWay() async throws {
        let n = try await nodes(delay: .seconds(3600))
        // A receipt is removed together with its receipt's write, on the device's node: never offered.
        let receipt = Task { await n.a.send(data("r1", to: n.token) { $0.deliveryReceiptRequested = true }) }
        try await n.a.waitUntil { (try? n.a.queue(n.token).map(\.appMessageID))?.contains("r1") == true }
        await n.a.settle()
        #expect(await receipt.value == .ack(from: n.token))
        #expect(n.device.ids.isEmpty)
        #expect(try n.a.queue(n.token).map(\.appMessageID) == ["r1"])
        // The device left B before the offer came: B leaves it to the write.
        n.b.engine.deviceDisconnected(token: n.token, link: n.device)
        let later = Task { await n.a.send(data("m2", to: n.token)) }
        // Offered (and so ticketed, its write an hour away) before the writer is made to take it.
        try await n.a.waitUntil { (try? n.a.engine.queuedMessages(token: n.token).map(\.appMessageID))?.contains("m2") == true }
        await n.a.settle()
        #expect(await later.value == .ack(from: n.token))
        #expect(try n.a.queue(n.token).map(\.appMessageID) == ["r1", "m2"])
        #expect(n.device.ids.isEmpty)
    }
}
