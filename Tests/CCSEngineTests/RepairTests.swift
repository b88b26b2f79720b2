import DeliveryCore
import CCSEngine
import CCSProtocol
import PushDomain
import StoreModel
import Foundation
import Locking
import Testing

/// One test per defect of issue 10; each failed before its fix.
@Suite struct RepairTests {
    // MARK: 2. outbound items of different devices with the same id

    @Test func sameUpstreamIDFromTwoDevicesSurvivesARestartAndEachAckRemovesOnlyItsOwn() async throws {
        let store = Harness.newStore()
        let (a, b): (String, String)
        do {
            let h = try Harness(store: store)
            a = try await h.register().token
            b = try await h.register().token
            #expect(await h.upstream(a, ["to": "111@gcm.googleapis.com", "message_id": "1"]) == .sent(messageID: "1"))
            #expect(await h.upstream(b, ["to": "111@gcm.googleapis.com", "message_id": "1"]) == .sent(messageID: "1"))
            // Like kill -9 before any app server ACKed: nothing but the store carries over.
            await h.engine.committer.shutdown()
        }
        let h = try Harness(store: store)
        #expect(Set(try h.engine.store.loadOutbound().map(\.token)) == [a, b])
        let server = h.appServer(id: "c")
        let delivered = server.sent.withLock { $0 }.compactMap { try? JSONValue.parse($0.json)["from"]?.stringValue }
        #expect(Set(delivered) == [a, b])
        h.engine.appServerAcknowledged(connectionID: "c", messageID: "1", to: b)
        await h.settle()
        #expect(try h.engine.store.loadOutbound().map(\.token) == [a])
        #expect(h.engine.outbound().map(\.token) == [a])
    }

    @Test func receiptsForTheSameAppMessageIDOnTwoDevicesAreBothKept() async throws {
        let h = try Harness()
        let d1 = try await h.register(), d2 = try await h.register()
        let one = await h.connect(d1.token), two = await h.connect(d2.token)
        _ = await h.send(data("same", to: d1.token) { $0.deliveryReceiptRequested = true })
        _ = await h.send(data("same", to: d2.token) { $0.deliveryReceiptRequested = true })
        h.engine.deviceAcknowledged(token: d1.token, deviceMessageID: one.ids[0])
        h.engine.deviceAcknowledged(token: d2.token, deviceMessageID: two.ids[0])
        await h.settle()
        #expect(Set(try h.engine.store.loadOutbound().map(\.token)) == [d1.token, d2.token])
        let server = h.appServer(id: "c")
        #expect(server.ids == ["dr2:same", "dr2:same"])
        // A receipt's ACK names no device: each ACK takes one of them.
        h.engine.appServerAcknowledged(connectionID: "c", messageID: "dr2:same", to: "gcm.googleapis.com")
        await h.settle()
        #expect(try h.engine.store.loadOutbound().count == 1)
        h.engine.appServerAcknowledged(connectionID: "c", messageID: "dr2:same")
        await h.settle()
        #expect(try h.engine.store.loadOutbound().isEmpty)
    }

    @Test func aSecondCopySentBeforeTheFirstIsStoredIsADuplicate() async throws {
        let h = try Harness()
        let d = try await h.register()
        let answers = Locked<[UpstreamOutcome]>([])
        for _ in 0..<2 {
            h.engine.upstream(from: d.token, UpstreamRequest(messageID: "twice", to: "111@gcm.googleapis.com")) { o in
                answers.withLock { $0.append(o) }
            }
        }
        await h.settle()
        #expect(Set(answers.withLock { $0 }) == [.sent(messageID: "twice"),
                                                  .sendError(messageID: "twice", error: .duplicateMessageID)])
        #expect(try h.engine.store.loadOutbound().count == 1)
        // Once ACKed, the id may be used again.
        let server = h.appServer(id: "c")
        #expect(server.ids == ["twice"])
        h.engine.appServerAcknowledged(connectionID: "c", messageID: "twice", to: d.token)
        #expect(await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": "twice"]) == .sent(messageID: "twice"))
    }

    // MARK: 3. a called-off live write must not call off its collapse

    @Test func aConfirmedLiveMessageStillCollapsesTheHeldOneWithItsKey() async throws {
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let d = try await h.register()
        _ = try await h.engine.setDeviceState(token: d.token, foreground: nil, idle: true)
        let device = await h.connect(d.token)
        #expect(await h.send(data("old", to: d.token) { $0.collapseKey = "score" }) == .ack(from: d.token))
        #expect(device.ids.isEmpty)  // Doze holds the normal-priority message
        let outcome = Locked<Outcome?>(nil)
        h.engine.downstream(data("new", to: d.token) { $0.collapseKey = "score"; $0.priority = .high },
                            senderID: "111") { o in outcome.withLock { $0 = o } }
        #expect(device.ids.count == 1)
        h.engine.deviceAcknowledged(token: d.token, deviceMessageID: device.ids[0])
        #expect(outcome.withLock { $0 } == .ack(from: d.token))  // called off: acked on confirmation
        await h.settle()
        #expect(try h.queue(d.token).isEmpty)
        _ = try await h.engine.setDeviceState(token: d.token, foreground: nil, idle: false)
        await h.settle()
        // Before the fix, "old" came back here, after the newer message with its key.
        #expect(device.payloads.map { $0["data"]?["id"] } == [.string("new")])
    }

    // MARK: 5. numbers from outside

    @Test func theVirtualClockCannotBeMovedPastItsLimit() async throws {
        let h = try Harness()
        await #expect(throws: Engine.ClockAdvanceError.beyondMaximum) {
            try await h.engine.advanceClock(byMillis: .max)
        }
        let before = h.clock.nowMillis()
        await #expect(throws: Engine.ClockAdvanceError.beyondMaximum) {
            try await h.engine.advanceClock(byMillis: VirtualClock.maximumMillis - before + 1)
        }
        #expect(h.clock.nowMillis() == before)
        #expect(try await h.engine.advanceClock(byMillis: VirtualClock.maximumMillis - before) == VirtualClock.maximumMillis)
    }

    // MARK: 6. the reinstall marker is its own field

    @Test func aStateChangeAfterAReinstallDoesNotAllowASecondReinstall() async throws {
        let store = Harness.newStore()
        let token: String
        do {
            let h = try Harness(store: store)
            token = try await h.register().token
            let fresh = try await h.engine.reinstall(token: token)
            _ = try await h.engine.setDeviceState(token: token, foreground: false, idle: nil)
            await #expect(throws: DeviceManagementError.invalidRequest("this installation was already re-installed as \(fresh.token)")) {
                _ = try await h.engine.reinstall(token: token)
            }
            await h.engine.committer.shutdown()
        }
        let h = try Harness(store: store)
        #expect(h.engine.device(token: token)?.replacedBy != nil)
        await #expect(throws: DeviceManagementError.self) { _ = try await h.engine.reinstall(token: token) }
        #expect(h.engine.allDevices().count == 2)
    }

    @Test func concurrentReinstallsOfOneInstallationMakeOneNewToken() async throws {
        let h = try Harness()
        let token = try await h.register().token
        async let first = try? h.engine.reinstall(token: token)
        async let second = try? h.engine.reinstall(token: token)
        let results = await [first, second]
        #expect(results.compactMap { $0 }.count == 1)
        #expect(h.engine.allDevices().count == 2)
    }

    // MARK: 7. memory follows the disk when a commit fails

    @Test func aFailedStateChangeLeavesMemoryAsTheDiskHasIt() async throws {
        let h = try Harness()
        let d = try await h.register()
        h.engine.store.injectFailures { if case .upsertDevice = $0 { return true } else { return false } }
        await #expect(throws: DeviceManagementError.self) {
            _ = try await h.engine.setDeviceState(token: d.token, foreground: false, idle: true)
        }
        #expect(h.engine.deviceState(token: d.token) == DeviceState())
        await #expect(throws: DeviceManagementError.self) { try await h.engine.uninstall(token: d.token) }
        #expect(h.engine.device(token: d.token)?.status == .active)
        h.engine.store.injectFailures(nil)
        #expect(await h.send(data("m", to: d.token)) == .ack(from: d.token))
        #expect(try h.engine.store.loadDevices().first?.status == .active)
    }

    /// A reset whose commit fails takes nothing away: devices, their topics and the upstream messages
    /// waiting for an app server are as before, and the waiting ones still go out.
    @Test func aFailedResetLeavesDevicesTopicsAndQueuedUpstreamAsTheyWere() async throws {
        let h = try Harness()
        let d = try await h.register()
        _ = await h.engine.subscribe([TopicSubscriptionChange(token: d.token, senderID: "111")], to: "news")
        _ = await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": "u1"])
        h.engine.store.injectFailures { if case .removeAllDevices = $0 { return true } else { return false } }
        await #expect(throws: DeviceManagementError.self) { _ = try await h.engine.reset() }
        h.engine.store.injectFailures(nil)
        #expect(h.engine.device(token: d.token)?.status == .active)
        #expect(h.engine.topics(token: d.token, senderID: "111")?.keys.sorted() == ["news"])
        #expect(await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": "u1"])
                == .sendError(messageID: "u1", error: .duplicateMessageID))
        let a = h.appServer(id: "a")
        await h.settle()
        #expect(a.ids == ["u1"])
    }

    // MARK: 8. uninstall racing downstream

    @Test func noMessageIsStoredForATokenOnceItsUninstallCommitted() async throws {
        let h = try Harness()
        for _ in 0..<20 {
            let d = try await h.register()
            let token = d.token
            await withTaskGroup(of: Void.self) { group in
                for i in 0..<40 {
                    group.addTask { _ = await h.send(data("m\(i)", to: token)) }
                    if i == 20 { group.addTask { try? await h.engine.uninstall(token: token) } }
                }
            }
            await h.settle()
            #expect(try h.queue(token).isEmpty)
        }
    }

    // MARK: 9. one failing op fails only its caller

    @Test func aFailingWriteNacksOnlyItsOwnMessage() async throws {
        // A long live-write delay holds the batch: the two sends below are committed together.
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let good = try await h.register(), bad = try await h.register()
        let holder = try await h.register()
        _ = await h.connect(holder.token)
        h.engine.downstream(data("hold", to: holder.token), senderID: "111") { _ in }  // a ticketed write, delayed
        h.engine.store.injectFailures { op in
            if case .enqueue(let m, _) = op { return m.token == bad.token } else { return false }
        }
        // Both writes are submitted before `downstream` returns (the device is offline: stored path).
        let outcomes = Locked<[String: Outcome]>([:])
        h.engine.downstream(data("ok", to: good.token), senderID: "111") { o in outcomes.withLock { $0["ok"] = o } }
        h.engine.downstream(data("bad", to: bad.token), senderID: "111") { o in outcomes.withLock { $0["bad"] = o } }
        await h.settle()  // urgent: takes the held batch now, as one transaction
        #expect(outcomes.withLock { $0["ok"] } == .ack(from: good.token))
        #expect(outcomes.withLock({ $0["bad"] }) == .nack(.unavailable))
        #expect(try h.queue(good.token).count == 1)
        #expect(try h.queue(bad.token).isEmpty)
    }

    @Test func theWholeBatchFailsOnlyWhenTheStoreDoes() async throws {
        let h = try Harness()
        let d = try await h.register()
        h.engine.store.injectFailures { if case .enqueue = $0 { return true } else { return false } }
        #expect(await h.send(data("m", to: d.token)) == .nack(.unavailable))
    }

    // MARK: 10. two taps of one notification

    @Test func twoConcurrentTapsOpenANotificationOnce() async throws {
        let h = try Harness()
        let d = try await h.register()
        _ = try await h.engine.setDeviceState(token: d.token, foreground: false, idle: nil)
        let device = await h.connect(d.token)
        _ = await h.send(DownstreamMessage(to: d.token, messageID: "n1", notification: ["title": "t"]))
        h.engine.deviceAcknowledged(token: d.token, deviceMessageID: device.ids[0])
        await h.settle()
        let id = try #require(try h.engine.store.tray(token: d.token).first?.deviceMessageID)
        async let a = h.engine.tapNotification(token: d.token, deviceMessageID: id)
        async let b = h.engine.tapNotification(token: d.token, deviceMessageID: id)
        let opened = try await [a, b].compactMap { $0 }
        #expect(opened.count == 1)
    }

    // MARK: the canonical message

    @Test func aMulticastAnswersEveryTokenInOrderAndKeepsThePlatformBlocks() async throws {
        let h = try Harness()
        let a = try await h.register(), b = try await h.register(senders: ["999"])
        var message = Message(messageID: "multi", data: ["k": "v"])
        message.android = .object(["priority": .string("high")])
        let results: [SendResult] = await withCheckedContinuation { cont in
            h.engine.send(SendRequest(sender: "111", target: .tokens([a.token, "nope", b.token]), message: message)) {
                cont.resume(returning: $0)
            }
        }
        #expect(results.count == 3)
        guard case .accepted(a.token, let id?, _) = results[0] else { Issue.record("\(results[0])"); return }
        #expect(results[1] == .refused(.invalidRegistration(token: "nope")))
        #expect(results[2] == .refused(.senderMismatch(token: b.token, sender: "111")))
        let stored = try #require(try h.queue(a.token).first)
        #expect(stored.deviceMessageID == id)
        #expect(stored.platformBlocks == #"{"android":{"priority":"high"}}"#)
    }

    @Test func aRestrictedPackageMustBeTheTokensApp() async throws {
        let h = try Harness()
        let d = try await h.register(app: "com.example.app")
        let results: [SendResult] = await withCheckedContinuation { cont in
            h.engine.send(SendRequest(sender: "111", target: .token(d.token),
                                      message: Message(messageID: "m", data: ["k": "v"], restrictedPackageName: "com.other"))) {
                cont.resume(returning: $0)
            }
        }
        #expect(results == [.refused(.packageMismatch(token: d.token, package: "com.other"))])
    }

    // MARK: reset

    @Test func resetForgetsDevicesQueuesAndOutboundButKeepsConnections() async throws {
        let h = try Harness()
        let d = try await h.register()
        let server = h.appServer(id: "c")
        let device = await h.connect(d.token)
        _ = await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": "u1"])
        _ = try await h.engine.setDeviceState(token: d.token, foreground: nil, idle: true)
        _ = await h.send(data("held", to: d.token))
        await h.settle()
        #expect(try await h.engine.reset() == 1)
        let closed = device.closed.load(ordering: .relaxed)
        #expect(closed)
        #expect(h.engine.allDevices().isEmpty)
        #expect(try h.engine.store.loadDevices().isEmpty)
        #expect(try h.engine.store.loadOutbound().isEmpty)
        #expect(try h.queue(d.token).isEmpty)
        #expect(h.engine.connections().map(\.info.id) == ["c"])
        #expect(h.engine.connections().first?.unackedOutbound == 0)
        #expect(await h.send(data("after", to: d.token)) == .nack(.invalidRegistration(token: d.token)))
        _ = server
    }

    /// An upstream message handed to an app server before its write (the live path) is forgotten by a
    /// reset like the others. Its write is held for the live-write delay; the reset's removal is urgent,
    /// and an urgent batch takes every held write first, in order: the message is written (the device
    /// hears `sent`) and then removed, never written after the removal, where it would come back (and
    /// go to the app server after a restart).
    @Test func aResetComesAfterTheHeldWritesOfLiveUpstreamMessages() async throws {
        for whole in [true, false] {
            let h = try Harness(liveWriteDelay: .seconds(3600))
            let d = try await h.register()
            let server = h.appServer(id: "c1")
            let outcome = Locked<UpstreamOutcome?>(nil)
            h.engine.upstream(from: d.token, UpstreamRequest(messageID: "u1", to: "111@gcm.googleapis.com")) { o in
                outcome.withLock { $0 = o }
            }
            #expect(server.ids == ["u1"])
            if whole {
                #expect(try await h.engine.reset() == 1)
            } else {
                #expect(try await h.engine.reset(sender: "111") == 1)
            }
            await h.settle()  // takes every held write that is still held
            #expect(try h.engine.store.loadOutbound().isEmpty)
            #expect(outcome.withLock { $0 } == .sent(messageID: "u1"))
        }
    }
}
