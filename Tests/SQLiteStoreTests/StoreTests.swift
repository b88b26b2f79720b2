import StoreModel
import PushDomain
import Foundation
import Locking
import Synchronization
import Testing

func device(_ token: String) -> DeviceRecord {
    DeviceRecord(token: token, deviceID: "id-\(token)", secret: "s", app: "a", platform: .android, senders: ["1"],
                 createdAt: 1, state: #"{"foreground":true,"idle":false}"#)
}

func message(_ token: String, _ id: String, collapseKey: String? = nil, expiresAt: Int64 = 10_000,
             kind: MessageKind = .message) -> QueuedMessage {
    QueuedMessage(token: token, deviceMessageID: id, senderID: "1", appMessageID: "app-\(id)", collapseKey: collapseKey,
                  priority: "normal", timeToLive: 10, enqueuedAt: 0, expiresAt: expiresAt,
                  deliveryReceiptRequested: false, kind: kind, payload: #"{"id":"\#(id)"}"#)
}

let limits = QueueLimits(maxCollapseKeys: 4, maxNonCollapsible: 100, overflowNotice: message("t", "deleted", kind: .deletedMessages))

@Suite struct StoreTests {
    @Test(arguments: Backend.available) func queueRoundTripKeepsArrivalOrderAndFields(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
        var m = message("t", "a")
        m.deliveryReceiptRequested = true
        m.delayWhileIdle = true
        m.isNotification = true
        try store.apply([.enqueue(m, limits: nil), .enqueue(message("t", "b"), limits: nil), .enqueue(message("u", "c"), limits: nil)])
        let queue = try store.queuedMessages(token: "t")
        #expect(queue.map(\.deviceMessageID) == ["a", "b"])
        #expect(queue[0] == m)
        try store.apply([.removeMessage(token: "t", deviceMessageID: "a")])
        #expect(try store.queuedMessages(token: "t").map(\.deviceMessageID) == ["b"])
        #expect(try store.queueCounts() == ["t": 1, "u": 1])
    }

    /// Two nodes that minted one id for one device (issue 39, item 4): the second write must fail, not
    /// silently take the first one's place (its sender would be ACKed for a message that is gone), in a
    /// batch of its own, with limits, and among other items (only its own item fails).
    @Test(arguments: Backend.available) func aSecondMessageWithAStoredIdIsRefusedNotOverwritten(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
        try store.apply([.enqueue(message("t", "same"), limits: nil)])
        var other = message("t", "same")
        other.appMessageID = "from-the-other-node"
        #expect(throws: (any Error).self) { try store.apply([.enqueue(other, limits: nil)]) }
        #expect(throws: (any Error).self) { try store.apply([.enqueue(other, limits: limits)]) }
        let results = try store.applyIsolated([[.enqueue(message("u", "fine"), limits: limits)], [.enqueue(other, limits: limits)]])
        #expect(results[0] == nil && results[1] != nil)
        #expect(try store.queuedMessages(token: "t").map(\.appMessageID) == ["app-same"])
        #expect(try store.queuedMessages(token: "u").map(\.deviceMessageID) == ["fine"])
        // A notice of the store's own (a `deleted:` or `send_error:` id) is the same fact again: kept, once.
        try store.apply([.enqueue(message("t", "deleted:1", kind: .deletedMessages), limits: nil)])
        try store.apply([.enqueue(message("t", "deleted:1", kind: .deletedMessages), limits: nil)])
        #expect(try store.queuedMessages(token: "t").map(\.deviceMessageID) == ["same", "deleted:1"])
    }

    @Test(arguments: Backend.available) func sameCollapseKeyReplacesTheStoredMessage(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
        try store.apply([.enqueue(message("t", "a", collapseKey: "k"), limits: nil)])
        try store.apply([.enqueue(message("t", "b", collapseKey: "k"), limits: nil)])
        try store.apply([.enqueue(message("u", "c", collapseKey: "k"), limits: nil)])
        #expect(try store.queuedMessages(token: "t").map(\.deviceMessageID) == ["b"])
        #expect(try store.queuedMessages(token: "u").map(\.deviceMessageID) == ["c"])
    }

    @Test(arguments: Backend.available) func atMostFourCollapseKeysTheOldestKeyGoesFirst(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
        for (i, key) in ["k1", "k2", "k3", "k4", "k5"].enumerated() {
            try store.apply([.enqueue(message("t", "m\(i)", collapseKey: key), limits: limits)])
        }
        #expect(try store.queuedMessages(token: "t").compactMap(\.collapseKey) == ["k2", "k3", "k4", "k5"])
        // Re-using k2 makes it the newest key: k3 is now the oldest and goes when k6 arrives.
        try store.apply([.enqueue(message("t", "m5", collapseKey: "k2"), limits: limits)])
        try store.apply([.enqueue(message("t", "m6", collapseKey: "k6"), limits: limits)])
        #expect(Set(try store.queuedMessages(token: "t").compactMap(\.collapseKey)) == ["k4", "k5", "k2", "k6"])
    }

    @Test(arguments: Backend.available) func the101stNonCollapsibleMessageDiscardsAllAndLeavesOneNotice(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
        for i in 0..<100 { try store.apply([.enqueue(message("t", "m\(i)"), limits: limits)]) }
        try store.apply([.enqueue(message("t", "c", collapseKey: "k"), limits: limits)])
        #expect(try store.queuedMessages(token: "t").count == 101)
        try store.apply([.enqueue(message("t", "m100"), limits: limits)])
        let after = try store.queuedMessages(token: "t")
        #expect(after.map(\.deviceMessageID).sorted() == ["c", "deleted"])
        // A second overflow does not add a second notice.
        for i in 200..<301 { try store.apply([.enqueue(message("t", "m\(i)"), limits: limits)]) }
        #expect(try store.queuedMessages(token: "t").filter { $0.kind == .deletedMessages }.count == 1)
    }

    @Test(arguments: Backend.available) func withoutLimitsNothingIsDiscarded(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
        for i in 0..<150 { try store.apply([.enqueue(message("t", "m\(i)"), limits: nil)]) }
        #expect(try store.queuedMessages(token: "t").count == 150)
    }

    @Test(arguments: Backend.available) func expiredMessagesAreRemoved(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
        try store.apply([.enqueue(message("t", "old", expiresAt: 100), limits: nil),
                         .enqueue(message("t", "new", expiresAt: 200), limits: nil)])
        try store.apply([.removeExpired(now: 100)])
        #expect(try store.queuedMessages(token: "t").map(\.deviceMessageID) == ["new"])
    }

    @Test(arguments: Backend.available) func outboundAndTrayPersist(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
        let r = OutboundRecord(senderID: "1", kind: .receipt, messageID: "dr2:x", token: "t", json: "{}", createdAt: 1, expiresAt: 2)
        try store.apply([.addOutbound(r), .addToTray(TrayEntry(token: "t", deviceMessageID: "m", payload: "{}", shownAt: 5))])
        #expect(try store.loadOutbound() == [r])
        #expect(try store.tray(token: "t").map(\.deviceMessageID) == ["m"])
        try store.apply([.removeOutbound(senderID: "1", kind: .receipt, token: "t", messageID: "dr2:x"), .clearTray(token: "t")])
        #expect(try store.loadOutbound().isEmpty)
        #expect(try store.tray(token: "t").isEmpty)
    }

    @Test(arguments: Backend.available) func outboundItemsOfTwoDevicesWithOneIDAreTwoItems(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
        let a = OutboundRecord(senderID: "1", kind: .upstream, messageID: "1", token: "a", json: "{}", createdAt: 1, expiresAt: 2)
        var b = a
        b.token = "b"
        try store.apply([.addOutbound(a), .addOutbound(b)])
        #expect(try store.loadOutbound() == [a, b])
        try store.apply([.removeOutbound(senderID: "1", kind: .upstream, token: "b", messageID: "1")])
        #expect(try store.loadOutbound() == [a])
    }

    @Test(arguments: Backend.available) func aCollapseOpRemovesOnlyThatTokensMessagesWithTheKey(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
        try store.apply([.enqueue(message("t", "a", collapseKey: "k"), limits: nil), .enqueue(message("t", "b"), limits: nil),
                         .enqueue(message("u", "c", collapseKey: "k"), limits: nil)])
        try store.apply([.collapse(token: "t", collapseKey: "k")])
        #expect(try store.queuedMessages(token: "t").map(\.deviceMessageID) == ["b"])
        #expect(try store.queuedMessages(token: "u").map(\.deviceMessageID) == ["c"])
    }

    @Test(arguments: Backend.available) func isolatedItemsCommitWhileTheFailingOneRollsBack(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
        store.injectFailures { if case .enqueue(let m, _) = $0 { return m.token == "bad" } else { return false } }
        let results = try store.applyIsolated([
            [.enqueue(message("t", "a"), limits: nil)],
            [.enqueue(message("u", "b"), limits: nil), .enqueue(message("bad", "c"), limits: nil)],
            [.enqueue(message("t", "d"), limits: nil)],
        ])
        #expect(results.map { $0 == nil } == [true, false, true])
        #expect(try store.queuedMessages(token: "t").map(\.deviceMessageID) == ["a", "d"])
        #expect(try store.queuedMessages(token: "u").isEmpty)  // its item rolled back as a whole
        #expect(throws: InjectedStoreFailure.self) { try store.apply([.enqueue(message("bad", "e"), limits: nil)]) }
    }

    @Test(arguments: Backend.available) func aMessageForATokenWithoutADeviceIsRefusedAndStoresNothing(_ backend: Backend) throws {
        let store = try temporaryStore(backend, devices: ["t"])
        #expect(throws: UnknownDevice.self) {
            try store.apply([.enqueue(message("t", "a"), limits: nil), .enqueue(message("nobody", "b"), limits: nil)])
        }
        #expect(try store.queuedMessages(token: "t").isEmpty)  // the batch rolled back as a whole
    }

    @Test(arguments: Backend.available) func theReinstallMarkerRoundTripsBesideTheState(_ backend: Backend) throws {
        let store = try temporaryStore(backend, devices: [])
        let device = DeviceRecord(token: "t", deviceID: "d", secret: "s", app: "a", platform: .android,
                                  senders: ["1"], createdAt: 1, status: .uninstalled,
                                  state: #"{"foreground":false,"idle":false}"#, replacedBy: "t2")
        try store.apply([.upsertDevice(device)])
        #expect(try store.loadDevices() == [device])
    }

    @Test(arguments: Backend.available) func devicesAndSendersSurviveReopening(_ backend: Backend) throws {
        let database = try TestDatabase(backend)
        let device = DeviceRecord(token: "t", deviceID: "d", secret: "s", app: "a", platform: .android,
                                  senders: ["1", "2"], createdAt: 3, state: #"{"idle":true}"#)
        do {
            let store = try database.open()
            try store.apply([.upsertDevice(device), .upsertSender(SenderRecord(senderID: "1", serverKey: "k", createdAt: 1)),
                             .setMeta(key: "virtual_clock_ms", value: "42")])
        }
        let reopened = try database.open()
        #expect(try reopened.loadDevices() == [device])
        #expect(try reopened.loadSenders().map(\.senderID) == ["1"])
        #expect(try reopened.meta("virtual_clock_ms") == "42")
    }
}

@Suite struct GroupCommitterTests {
    @Test(arguments: Backend.available) func completionRunsAfterTheCommitIsVisible(_ backend: Backend) async throws {
        let committer = GroupCommitter(store: try temporaryStore(backend), clock: ManualCommitterClock())
        let seen: Int = await withCheckedContinuation { cont in
            committer.submit(.enqueue(message("t", "a"), limits: nil)) { _ in
                cont.resume(returning: (try? committer.store.queuedMessages(token: "t").count) ?? -1)
            }
        }
        #expect(seen == 1)
        await committer.shutdown()
    }

    @Test(arguments: Backend.available) func writesSubmittedWhileTheWriterIsBusyShareOneTransaction(_ backend: Backend) async throws {
        // A ticketed write waiting out its delay holds the writer: everything submitted meanwhile
        // waits behind it, and the urgent read at the end takes all of it as one batch.
        let committer = GroupCommitter(store: try temporaryStore(backend), cancellableDelay: .seconds(3600), clock: ManualCommitterClock())
        let n = 2000
        committer.submit([.enqueue(message("h", "held"), limits: nil)], ticket: WriteTicket())
        let done = Atomic<Int>(0)
        for i in 0..<n {
            committer.submit(.enqueue(message("t", "m\(i)"), limits: nil)) { _ in done.add(1, ordering: .relaxed) }
        }
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in committer.afterPendingWrites { cont.resume() } }
        let stats = committer.statistics
        #expect(done.load(ordering: .relaxed) == n)
        #expect(stats.ops == n + 1)
        #expect(stats.batches == 1)
        #expect(try committer.store.queuedMessages(token: "t").count == n)
        await committer.shutdown()
    }

    @Test(arguments: Backend.available) func aRepeatedCollapseInOneBatchIsAppliedOnceUnlessAMessageCameBetween(_ backend: Backend) async throws {
        let committer = GroupCommitter(store: try temporaryStore(backend), cancellableDelay: .seconds(3600), clock: ManualCommitterClock())
        committer.submit([.enqueue(message("h", "held"), limits: nil)], ticket: WriteTicket())  // holds the batch open
        committer.submit(.enqueue(message("t", "a", collapseKey: "k"), limits: nil))
        for _ in 0..<3 { committer.submit(.collapse(token: "t", collapseKey: "k")) }  // one of them is applied
        committer.submit(.enqueue(message("t", "b", collapseKey: "k"), limits: nil))
        committer.submit(.collapse(token: "t", collapseKey: "k"))   // applied: "b" came after the first
        committer.submit(.enqueue(message("u", "c", collapseKey: "k"), limits: nil))
        committer.submit(.collapse(token: "u", collapseKey: "k"))   // another token: applied
        committer.submit(.collapse(token: "t", collapseKey: "other"))  // another key: applied
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in committer.afterPendingWrites { cont.resume() } }
        #expect(committer.statistics.ops == 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1)
        #expect(try committer.store.queuedMessages(token: "t").isEmpty)
        #expect(try committer.store.queuedMessages(token: "u").isEmpty)
        await committer.shutdown()
    }

    @Test(arguments: Backend.available) func readsSeeEveryWriteSubmittedBeforeThem(_ backend: Backend) async throws {
        let committer = GroupCommitter(store: try temporaryStore(backend), clock: ManualCommitterClock())
        for i in 0..<50 { committer.submit(.enqueue(message("t", "m\(i)"), limits: nil)) }
        let count: Int = await withCheckedContinuation { cont in
            committer.afterPendingWrites { cont.resume(returning: (try? committer.store.queuedMessages(token: "t").count) ?? -1) }
        }
        #expect(count == 50)
        await committer.shutdown()
    }

    @Test(arguments: Backend.available) func aCancelledWriteIsNeverAppliedAndItsCompletionNeverRuns(_ backend: Backend) async throws {
        let clock = ManualCommitterClock()
        let committer = GroupCommitter(store: try temporaryStore(backend), cancellableDelay: .milliseconds(300), clock: clock)
        let ticket = WriteTicket()
        let ran = Atomic<Bool>(false)
        committer.submit([.enqueue(message("t", "early"), limits: nil)], ticket: ticket) { _ in
            ran.store(true, ordering: .relaxed)
        }
        await clock.untilAWriterSleeps()     // the writer holds it: it may still be called off
        #expect(ticket.cancel())
        #expect(!ticket.cancel())
        // A write behind the cancelled one keeps its place: it is written once the delay the writer
        // waits out is over, without the cancelled one.
        await withCheckedContinuation { cont in
            committer.submit(.enqueue(message("t", "later"), limits: nil)) { _ in cont.resume() }
            clock.advance(by: .milliseconds(300))
        }
        #expect(try committer.store.queuedMessages(token: "t").map(\.deviceMessageID) == ["later"])
        await committer.shutdown()
        let completionRan = ran.load(ordering: .relaxed)
        #expect(!completionRan)
    }

    /// What a called-off write held is released by the thread that calls it off, at once: the writer
    /// thread freeing the event loop's memory contended for its allocator's lock (docs/benchmarks.md).
    @Test(arguments: Backend.available) func aCalledOffWriteIsReleasedByWhoeverCallsItOff(_ backend: Backend) throws {
        final class Releases: Sendable {
            let threads = Locked<[pthread_t]>([])
        }
        final class Held: Sendable {
            let releases: Releases
            init(_ releases: Releases) { self.releases = releases }
            deinit { releases.threads.withLock { $0.append(pthread_self()) } }
        }
        let committer = GroupCommitter(store: try temporaryStore(backend), cancellableDelay: .seconds(60), clock: ManualCommitterClock())
        let releases = Releases()
        let ticket = WriteTicket()
        do {
            let held = Held(releases)
            committer.submit([.enqueue(message("t", "early"), limits: nil)], ticket: ticket) { _ in
                withExtendedLifetime(held) {}
            }
        }
        #expect(releases.threads.withLock { $0 }.isEmpty)  // the ticket holds the write (and its completion)
        #expect(ticket.cancel())
        #expect(releases.threads.withLock { $0 }.map { pthread_equal($0, pthread_self()) != 0 } == [true])
        committer.shutdownBlocking()
        #expect(committer.statistics.cancellableCalledOff == 1)
    }

    @Test(arguments: Backend.available) func aDelayedWriteKeepsItsPlaceAndIsCommittedWhenNotCancelled(_ backend: Backend) async throws {
        let clock = ManualCommitterClock()
        let committer = GroupCommitter(store: try temporaryStore(backend), cancellableDelay: .milliseconds(50), clock: clock)
        let ticket = WriteTicket()
        let order = Locked<[String]>([])
        committer.submit([.enqueue(message("t", "first"), limits: nil)], ticket: ticket) { error in
            #expect(error == nil)
            order.withLock { $0.append("first") }
        }
        await withCheckedContinuation { cont in
            committer.submit(.enqueue(message("t", "second"), limits: nil)) { _ in
                order.withLock { $0.append("second") }
                cont.resume()
            }
            clock.advance(by: .milliseconds(50))
        }
        #expect(order.withLock { $0 } == ["first", "second"])
        #expect(!ticket.cancel()) // taken: too late to call off
        #expect(try committer.store.queuedMessages(token: "t").map(\.deviceMessageID) == ["first", "second"])
        await committer.shutdown()
    }

    @Test(arguments: Backend.available) func aReaderOrAnUrgentWriteDoesNotWaitOutTheDelayOfWritesAheadOfIt(_ backend: Backend) async throws {
        let committer = GroupCommitter(store: try temporaryStore(backend), cancellableDelay: .seconds(60), clock: ManualCommitterClock())
        committer.submit([.enqueue(message("t", "live"), limits: nil)], ticket: WriteTicket())
        // The read must see the write ahead of it, so that write is taken now instead of in 60 s.
        let seen: [String] = await withCheckedContinuation { cont in
            committer.afterPendingWrites {
                cont.resume(returning: (try? committer.store.queuedMessages(token: "t").map(\.deviceMessageID)) ?? [])
            }
        }
        #expect(seen == ["live"])
        committer.submit([.enqueue(message("t", "live2"), limits: nil)], ticket: WriteTicket())
        let error: Error? = await withCheckedContinuation { cont in
            committer.submit([.setMeta(key: "k", value: "v")], urgent: true) { cont.resume(returning: $0) }
        }
        #expect(error == nil)
        #expect(try committer.store.queuedMessages(token: "t").map(\.deviceMessageID) == ["live", "live2"])
        #expect(committer.statistics.cancellableCommitted == 2)
        await committer.shutdown()
    }

    /// The delay of a cancellable write is a window on the committer's clock: the write and those
    /// behind it wait while it is open, however long that takes on the wall, and are written together
    /// the moment the clock reaches its end (before the clock was injected this needed a sleep).
    @Test(arguments: Backend.available) func theBatchWindowClosesWhenTheClockReachesTheDelay(_ backend: Backend) async throws {
        let clock = ManualCommitterClock()
        let committer = GroupCommitter(store: try temporaryStore(backend), cancellableDelay: .milliseconds(50), clock: clock)
        let (committed, commit) = AsyncStream.makeStream(of: String.self)
        let ticket = WriteTicket()
        committer.submit([.enqueue(message("t", "live"), limits: nil)], ticket: ticket) { _ in commit.yield("live") }
        await clock.untilAWriterSleeps()
        for i in 0..<3 {
            committer.submit(.enqueue(message("t", "behind\(i)"), limits: nil)) { _ in commit.yield("behind\(i)") }
        }
        clock.advance(by: .milliseconds(49))    // still open: the writer sleeps on, nothing is written
        await clock.untilAWriterSleeps()
        #expect(ticket.isPending)
        #expect(committer.statistics.batches == 0)
        #expect(try committer.store.queuedMessages(token: "t").isEmpty)
        clock.advance(by: .milliseconds(1))     // closed: no submission wakes the writer, the clock does
        var order: [String] = []
        for await name in committed {
            order.append(name)
            if order.count == 4 { break }
        }
        #expect(order == ["live", "behind0", "behind1", "behind2"])
        #expect(!ticket.cancel())
        let stats = committer.statistics
        #expect(stats.batches == 1 && stats.ops == 4 && stats.cancellableCommitted == 1 && stats.cancellableCalledOff == 0)
        await committer.shutdown()
    }

    @Test(arguments: Backend.available) func shutdownCommitsWhatWasSubmittedAndRefusesMore(_ backend: Backend) async throws {
        let committer = GroupCommitter(store: try temporaryStore(backend), clock: ManualCommitterClock())
        for i in 0..<10 { committer.submit(.enqueue(message("t", "m\(i)"), limits: nil)) }
        await committer.shutdown()
        #expect(try committer.store.queuedMessages(token: "t").count == 10)
        let error: Error? = await withCheckedContinuation { cont in
            committer.submit(.enqueue(message("t", "late"), limits: nil)) { cont.resume(returning: $0) }
        }
        #expect(error is StoreStopped)
    }

    /// Once stopped, a refused submission's completion (and a refused read) runs later, never on the
    /// submitting thread inside the call: callers submit inside critical sections whose lock their
    /// completion takes, and an inline run was a recursive acquire (issue 39, item 10).
    @Test(arguments: Backend.available) func aRefusedCompletionNeverRunsInsideTheSubmittingCall(_ backend: Backend) async throws {
        let committer = GroupCommitter(store: try temporaryStore(backend), clock: ManualCommitterClock())
        await committer.shutdown()
        // The submitter holds a recursive lock around the call; each completion takes it and reads
        // whether the call is still running. Run inline (the same thread, inside the call) it gets
        // the lock at once and sees the call running; run anywhere else it waits for the call to end.
        final class CallLock: @unchecked Sendable {
            let lock = NSRecursiveLock()
            var submitting = false
        }
        let call = CallLock()
        let inline = Locked<[String]>([])
        func refused(_ what: String, _ submit: (@escaping @Sendable () -> Void) -> Void) async {
            await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
                call.lock.lock()
                call.submitting = true
                submit {
                    call.lock.lock()
                    let inside = call.submitting
                    call.lock.unlock()
                    if inside { inline.withLock { $0.append(what) } }
                    cont.resume()
                }
                call.submitting = false
                call.lock.unlock()
            }
        }
        await refused("submit") { done in committer.submit(.enqueue(message("t", "late"), limits: nil)) { _ in done() } }
        await refused("ticketed") { done in
            committer.submit([.enqueue(message("t", "live"), limits: nil)], ticket: WriteTicket()) { _ in done() }
        }
        await refused("urgent") { done in committer.submit([.setMeta(key: "k", value: "v")], urgent: true) { _ in done() } }
        await refused("read") { done in committer.afterPendingWrites { done() } }
        #expect(inline.withLock { $0 }.isEmpty)
        let error: Error? = await withCheckedContinuation { cont in
            committer.submit(.enqueue(message("t", "later"), limits: nil)) { cont.resume(returning: $0) }
        }
        #expect(error is StoreStopped)
    }
}

@Suite struct FanOutTests {
    @Test(arguments: Backend.available) func aFanOutQueuesTheMessageForEverySubscriberUnderTheirRules(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
        try store.apply([.subscribe(["t", "u", "h"].map { TopicSubscription(senderID: "1", topic: "news", token: $0, addedAt: 1) })])
        // h already holds the most non-collapsible messages: it gets the notice instead.
        let small = QueueLimits(maxCollapseKeys: 4, maxNonCollapsible: 2, overflowNotice: message("h", "notice", kind: .deletedMessages))
        try store.apply([.enqueue(message("h", "h1"), limits: nil), .enqueue(message("h", "h2"), limits: nil),
                         .enqueue(message("t", "old", collapseKey: "k"), limits: nil)])
        var m = message("", "f1", collapseKey: nil)
        m.platformBlocks = #"{"android":{}}"#
        try store.apply([.fanOut(FanOut(audience: .subscribers(senderID: "1", topic: "news"), message: m, limits: small))])
        #expect(try store.queuedMessages(token: "t").map(\.deviceMessageID) == ["old", "f1"])
        #expect(try store.queuedMessages(token: "t").last?.platformBlocks == #"{"android":{}}"#)
        #expect(try store.queuedMessages(token: "u").map(\.deviceMessageID) == ["f1"])
        #expect(try store.queuedMessages(token: "h").map(\.kind) == [.deletedMessages])
        // A collapsible one replaces the stored message with its key; a token list works the same.
        try store.apply([.fanOut(FanOut(audience: .tokens(["t", "u", "nobody"]), message: message("", "f2", collapseKey: "k"),
                                        limits: small))])
        #expect(try store.queuedMessages(token: "t").map(\.deviceMessageID) == ["f1", "f2"])
        #expect(try store.queuedMessages(token: "u").map(\.deviceMessageID) == ["f1", "f2"])
        // A notification without a key collapses under each device's app.
        try store.apply([.fanOut(FanOut(audience: .tokens(["u"]), message: message("", "f3"), limits: small, collapseKeyIsApp: true)),
                         .fanOut(FanOut(audience: .tokens(["u"]), message: message("", "f4"), limits: small, collapseKeyIsApp: true))])
        #expect(try store.queuedMessages(token: "u").map(\.deviceMessageID) == ["f1", "f2", "f4"])
        #expect(try store.queuedMessages(token: "u").last?.collapseKey == "a")
    }
}
