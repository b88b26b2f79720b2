@testable import DeliveryCore
import PushDomain
import StoreModel
import Testing

/// The delivery core through its events and effects alone: a value, no store, no threads, no clock
/// (every time is given). What the engine performs is exactly what these effects say.
@Suite struct DeliveryCoreTests {
    static let settings = DeliveryCore.Settings(deviceWindow: 2, maxCollapseKeys: 4, maxStoredNonCollapsible: 100)
    static let now: Int64 = 1_000_000

    static func core(devices: [(token: String, status: DeviceStatus)] = [("t", .active)],
                     throttle: CollapsibleThrottleRate? = nil) -> DeliveryCore {
        var core = DeliveryCore(settings: settings, throttle: throttle)
        for d in devices {
            core.registry.add(DeviceRecord(token: d.token, deviceID: "d-" + d.token, secret: "s", app: "com.example",
                                           platform: .android, senders: ["111"], createdAt: 0, status: d.status))
        }
        return core
    }

    static func queued(_ id: String, token: String = "t", collapseKey: String? = nil, ttl: Int = 60) -> QueuedMessage {
        QueuedMessage(token: token, deviceMessageID: id, senderID: "111", appMessageID: "m" + id, collapseKey: collapseKey,
                      priority: "high", timeToLive: ttl, enqueuedAt: now, expiresAt: now + Int64(ttl) * 1000,
                      deliveryReceiptRequested: false, delayWhileIdle: false, payload: #"{"data":{"k":"v"}}"#)
    }

    /// A connected device whose backlog (empty) was read: it takes messages now.
    static func connected(_ core: inout DeliveryCore, _ token: String = "t", id: UInt = 1) {
        _ = core.sessions.connect(token, connection: DeviceConnectionID(id), platform: .android)
        _ = core.backlogRead([], token: token, connection: DeviceConnectionID(id), now: now)
    }

    static func delivered(_ effects: [DeviceEffect]) -> [String] {
        effects.flatMap { effect -> [String] in
            guard case .deliver(_, let deliveries, _, _, _) = effect else { return [] }
            return deliveries.map(\.message.deviceMessageID)
        }
    }

    @Test func theLookUpRefusesInFCMsOrderAndMintsOrderedIDs() {
        var core = Self.core(devices: [("t", .active), ("gone", .uninstalled)])
        let message = Message(messageID: "m1")
        #expect(core.lookUp(message, given: "nobody", senderID: "111", origin: .fcm, now: Self.now, nowMicros: 5) ==
                .failure(.invalidRegistration(token: "nobody")))
        #expect(core.lookUp(message, given: "gone", senderID: "111", origin: .fcm, now: Self.now, nowMicros: 5) ==
                .failure(.unregistered(token: "gone")))
        #expect(core.lookUp(message, given: "t", senderID: "222", origin: .fcm, now: Self.now, nowMicros: 5) ==
                .failure(.senderMismatch(token: "t", sender: "222")))
        guard case .success(let first) = core.lookUp(message, given: "t", senderID: "111", origin: .fcm, now: Self.now, nowMicros: 5),
              case .success(let second) = core.lookUp(message, given: "t", senderID: "111", origin: .fcm, now: Self.now, nowMicros: 5)
        else { Issue.record("an active device of this sender is found"); return }
        #expect(!first.takesNow && first.installation == "t")
        // The clock stood still: the second id is still later than the first.
        #expect(core.lastMicros == 6 && first.deviceMessageID != second.deviceMessageID)
    }

    @Test func anOfflineDevicesMessageIsStoredWithTheQueueLimits() {
        var core = Self.core()
        let submission = core.submit(Self.queued("1"), early: nil, limits: nil, now: Self.now)
        guard case .stored(.enqueue(let m, let limits), _) = submission else { Issue.record("stored: \(submission)"); return }
        #expect(m.deviceMessageID == "1" && limits?.maxNonCollapsible == 100 && limits?.maxCollapseKeys == 4)
    }

    @Test func aConnectedDeviceGetsItNowAndItsWriteMayBeCalledOff() {
        var core = Self.core()
        Self.connected(&core)
        let early = EarlyDelivery(write: WriteID(7))
        let submission = core.submit(Self.queued("1"), early: early, limits: nil, now: Self.now)
        guard case .live(let handOver, let collapse, let write) = submission else { Issue.record("live: \(submission)"); return }
        #expect(Self.delivered(handOver) == ["1"] && collapse == nil && write == .enqueue(Self.queued("1"), limits: nil))
        #expect(core.sessions.online["t"]?.inFlight["1"]?.early == early)
        // The device confirms before the writer takes the write: the host is asked to call it off.
        let confirmation = core.confirm("1", token: "t")
        #expect(confirmation?.mayCallOff == WriteID(7) && confirmation?.refill == nil)
        #expect(core.sessions.online["t"]?.inFlight.isEmpty == true)
    }

    @Test func aFullWindowSendsTheMessageToTheStoreAndATimeToLiveOfZeroIsDropped() {
        var core = Self.core()
        Self.connected(&core)
        for id in ["1", "2"] {
            _ = core.submit(Self.queued(id), early: EarlyDelivery(write: WriteID(1)), limits: nil, now: Self.now)
        }
        let third = core.submit(Self.queued("3"), early: EarlyDelivery(write: WriteID(3)), limits: nil, now: Self.now)
        guard case .stored(.enqueue(_, let limits), _) = third else { Issue.record("stored: \(third)"); return }
        // The two the window holds do not count against the 100 that may wait.
        #expect(limits?.maxNonCollapsible == 102)
        let now = core.submit(Self.queued("4", ttl: 0), early: EarlyDelivery(write: WriteID(4)), limits: nil, now: Self.now)
        #expect(now == .dropped(effects: []))
    }

    @Test func anUninstallBetweenLookUpAndSubmissionIsUnregistered() {
        var core = Self.core()
        var record = core.registry.devices["t"]!
        record.status = .uninstalled
        core.registry.update(record)
        #expect(core.submit(Self.queued("1"), early: nil, limits: nil, now: Self.now) == .unregistered)
    }

    @Test func aBacklogReadForAReplacedConnectionIsDropped() {
        var core = Self.core()
        _ = core.sessions.connect("t", connection: DeviceConnectionID(1), platform: .android)
        _ = core.sessions.connect("t", connection: DeviceConnectionID(2), platform: .android)
        #expect(core.backlogRead([Self.queued("1")], token: "t", connection: DeviceConnectionID(1), now: Self.now) == nil)
        #expect(core.handOver([Self.queued("1")], to: "t", now: Self.now).isEmpty, "not loaded: the backlog read brings it")
        let read = core.backlogRead([Self.queued("1"), Self.queued("old", ttl: 0)], token: "t", connection: DeviceConnectionID(2),
                                    now: Self.now)
        #expect(read.map(Self.delivered) == ["1"], "an expired message is not handed over")
        #expect(read?.first.map { if case .deliver(DeviceConnectionID(2), _, .android, "com.example", false) = $0 { true } else { false } } == true)
    }

    @Test func theThrottleHoldsACollapsibleMessageBackAndSaysSoOnce() {
        var core = Self.core(throttle: CollapsibleThrottleRate(burst: 1, refillMillis: 60_000))
        Self.connected(&core)
        let first = core.handOver([Self.queued("1", collapseKey: "k")], to: "t", now: Self.now)
        let second = core.handOver([Self.queued("2", collapseKey: "k")], to: "t", now: Self.now)
        #expect(Self.delivered(first) == ["1"] && Self.delivered(second).isEmpty)
        #expect(second.contains { if case .throttled(let m, _) = $0 { m.deviceMessageID == "2" } else { false } })
        let again = core.handOver([Self.queued("2", collapseKey: "k")], to: "t", now: Self.now)
        #expect(again.isEmpty, "held already: reported once")
        #expect(core.throttleDue(now: Self.now + 60_000).map(\.token) == ["t"])
    }

    @Test func aLiveMessageTheThrottleHoldsIsStoredAndItsReportKept() {
        var core = Self.core(throttle: CollapsibleThrottleRate(burst: 1, refillMillis: 60_000))
        Self.connected(&core)
        _ = core.submit(Self.queued("1", collapseKey: "k"), early: EarlyDelivery(write: WriteID(1)), limits: nil, now: Self.now)
        let held = core.submit(Self.queued("2", collapseKey: "k"), early: EarlyDelivery(write: WriteID(2)), limits: nil, now: Self.now)
        guard case .stored(_, let effects) = held else { Issue.record("stored: \(held)"); return }
        #expect(effects.count == 1 && effects.allSatisfy { if case .throttled = $0 { true } else { false } })
    }

    @Test func aStoredAPNsNotificationMakesEveryNewerOneCollapse() {
        var core = Self.core()
        Self.connected(&core)
        var apns = Self.queued("a1", collapseKey: DeliveryCore.apnsStoreAndForwardKey)
        apns.kind = .apnsNotification
        // Known to hold none: nothing to collapse for the first one handed over live.
        guard case .live(_, let none, _) = core.submit(apns, early: EarlyDelivery(write: WriteID(1)), limits: nil, now: Self.now)
        else { Issue.record("live"); return }
        #expect(none == nil)
        // Another on the connection: the next collapses (the first may be written).
        var next = apns
        next.deviceMessageID = "a2"
        guard case .live(_, let collapse, _) = core.submit(next, early: EarlyDelivery(write: WriteID(2)), limits: nil, now: Self.now)
        else { Issue.record("live"); return }
        #expect(collapse == .collapse(token: "t", collapseKey: DeliveryCore.apnsStoreAndForwardKey))
    }

    @Test func aConfirmationWritesTheRemovalTheTrayEntryAndTheReceiptInOneCommit() {
        var m = Self.queued("1")
        m.deliveryReceiptRequested = true
        let device = DeliveryCore.ConfirmingDevice(app: "com.example", platform: .android, apnsToken: nil)
        let tray = InFlightDownstream(message: m, toTray: true)
        let writes = DeliveryCore.confirmationWrites(tray, token: "t", calledOff: false, device: device, now: Self.now)
        #expect(writes.end == .removed)
        #expect(writes.ops.count == 3 && writes.ops.first == .removeMessage(token: "t", deviceMessageID: "1"))
        guard case .addToTray(let entry) = writes.ops[1], case .addOutbound(let receipt) = writes.ops[2] else {
            Issue.record("tray entry, then receipt: \(writes.ops)"); return
        }
        #expect(entry.shownAt == Self.now && entry.deviceMessageID == "1")
        #expect(receipt == writes.receipt && receipt.kind == .receipt && receipt.messageID == "dr2:m1" && receipt.aboutMessageID == "1")
    }

    @Test func aCalledOffOrOfferedMessageWritesNothingOfItsOwn() {
        let plain = InFlightDownstream(message: Self.queued("1"), toTray: false)
        let calledOff = DeliveryCore.confirmationWrites(plain, token: "t", calledOff: true, device: nil, now: Self.now)
        #expect(calledOff == .init(end: .calledOff, ops: [], receipt: nil))
        let offered = InFlightDownstream(message: Self.queued("2"), toTray: false, offeredBy: "node-b")
        let live = DeliveryCore.confirmationWrites(offered, token: "t", calledOff: false, device: nil, now: Self.now)
        #expect(live == .init(end: .confirmLive(node: "node-b"), ops: [], receipt: nil))
    }

    @Test func aNewConnectionClosesTheOlderWithItsEarlyWritesAndAsksForTheQueue() {
        var core = Self.core()
        #expect(core.deviceConnected("t", connection: DeviceConnectionID(1)) == [.readBacklog(token: "t", DeviceConnectionID(1))])
        _ = core.backlogRead([], token: "t", connection: DeviceConnectionID(1), now: Self.now)
        _ = core.submit(Self.queued("1"), early: EarlyDelivery(write: WriteID(9)), limits: nil, now: Self.now)
        #expect(core.deviceConnected("t", connection: DeviceConnectionID(2)) == [
            .release(DeviceConnectionID(1), writes: [WriteID(9)], close: true), .readBacklog(token: "t", DeviceConnectionID(2)),
        ])
        // The older connection's own disconnect comes later and changes nothing.
        #expect(core.deviceDisconnected("t", connection: DeviceConnectionID(1)).isEmpty)
        #expect(core.deviceDisconnected("t", connection: DeviceConnectionID(2)) ==
                [.release(DeviceConnectionID(2), writes: [], close: false)])
        #expect(core.sessions.online.isEmpty)
    }

    @Test func aTopicMessageIsWrittenForItsSubscribersAndHandedToThoseConnectedAfterTheCommit() {
        var core = Self.core(devices: [("a", .active), ("b", .active), ("c", .active)])
        for token in ["a", "b"] { _ = core.topics.add(.init(senderID: "111", name: "news"), token: token, at: 0) }
        Self.connected(&core, "a")
        let plan = core.fanOut(Message(messageID: "m1"), to: .topic("news"), senderID: "111", from: "/topics/news",
                               now: Self.now, nowMicros: 9)
        guard case .write(let fanOut, let queued, let members, let micros) = plan else { Issue.record("write: \(plan)"); return }
        #expect(members == ["a", "b"] && micros == 9 && fanOut.audience == .subscribers(senderID: "111", topic: "news"))
        // After the commit only the connected member with its backlog read gets it now.
        let effects = core.fannedOut(queued, members: members, now: Self.now)
        #expect(Self.delivered(effects).count == 1)
        #expect(effects.allSatisfy { if case .deliver(DeviceConnectionID(1), let d, _, _, _) = $0 { d[0].message.token == "a" } else { false } })
    }

    @Test func aTopicMessageOverTheSendersRateIsRefusedBeforeItGetsAnID() {
        var core = DeliveryCore(settings: Self.settings, topicRate: MessageRate(windows: [MessageRate.Window(limit: 1, periodMillis: 60_000)!]))
        let first = core.fanOut(Message(messageID: "m1"), to: .topic("news"), senderID: "111", from: "/topics/news", now: Self.now, nowMicros: 1)
        let second = core.fanOut(Message(messageID: "m2"), to: .topic("news"), senderID: "111", from: "/topics/news", now: Self.now, nowMicros: 2)
        guard case .write = first, case .overRate(let topic, let wait) = second else { Issue.record("\(first) then \(second)"); return }
        #expect(topic == "news" && wait > 0 && core.lastMicros == 1)
    }

    @Test func anUninstallTakesTheDeviceOfflineAndOutOfItsTopicsAndItsUndoPutsThemBack() {
        var core = Self.core()
        _ = core.topics.add(.init(senderID: "111", name: "news"), token: "t", at: 5)
        Self.connected(&core)
        let before = core.registry.devices["t"]!
        let u = core.uninstall(before)
        #expect(core.registry.devices["t"]?.status == .uninstalled && core.sessions.online["t"] == nil)
        #expect(u.effects == [.release(DeviceConnectionID(1), writes: [], close: true)])
        #expect(u.ops == [.upsertDevice(u.after), .removeAllMessages(token: "t"), .clearTray(token: "t"), .removeSubscriptions(token: "t")])
        #expect(core.topics.subscribers(of: .init(senderID: "111", name: "news")).isEmpty)
        core.undo(u)
        #expect(core.registry.devices["t"] == before)
        #expect(core.topics.subscribers(of: .init(senderID: "111", name: "news")) == ["t"])
    }

    @Test func aReinstallsUndoRemovesTheFreshRegistrationAndGivesTheOldItsAPNsTokenBack() {
        var core = DeliveryCore(settings: Self.settings)
        let old = DeviceRecord(token: "old", deviceID: "d1", secret: "s", app: "com.example", platform: .ios, senders: ["111"],
                               createdAt: 0, apnsToken: "aa")
        core.registry.add(old)
        let fresh = DeviceRecord(token: "new", deviceID: "d2", secret: "s", app: "com.example", platform: .ios, senders: ["111"],
                                 createdAt: 1, apnsToken: "aa")
        let u = core.uninstall(old, replacedBy: fresh)
        #expect(core.registry.holder(ofAPNsToken: "aa")?.token == "new" && u.after.replacedBy == "new")
        #expect(u.ops.contains(.removeAPNsFeedbackToken(bundleID: "com.example", deviceToken: "aa")))
        core.undo(u)
        #expect(core.registry.devices["new"] == nil && core.registry.devices["old"] == old)
        #expect(core.registry.holder(ofAPNsToken: "aa")?.token == "old")
    }

    @Test func leavingDozeWakesTheDeviceAndTheUndoPutsTheStateBack() {
        var core = Self.core()
        let idle = core.setState("t", foreground: nil, idle: true)
        #expect(idle?.woke == false && core.registry.deviceStates["t"] == DeviceState(foreground: true, idle: true))
        let active = core.setState("t", foreground: nil, idle: false)
        #expect(active?.woke == true && active?.ops == [.upsertDevice(core.registry.devices["t"]!)])
        if let active { core.undo(active) }
        #expect(core.registry.deviceStates["t"] == DeviceState(foreground: true, idle: true))
        #expect(core.setState("nobody", foreground: true, idle: nil) == nil)
    }

    @Test func aSendersResetRemovesItsOwnDevicesAndLeavesSharedOnesWithoutIt() {
        var core = Self.core(devices: [("own", .active)])
        core.registry.add(DeviceRecord(token: "shared", deviceID: "d-s", secret: "s", app: "com.example", platform: .android,
                                       senders: ["111", "222"], createdAt: 0))
        _ = core.topics.add(.init(senderID: "111", name: "news"), token: "shared", at: 0)
        Self.connected(&core, "own")
        let reset = core.resetSender("111")
        #expect(reset.removed == 1 && reset.effects == [.release(DeviceConnectionID(1), writes: [], close: true)])
        #expect(core.registry.devices["own"] == nil && core.registry.devices["shared"]?.senders == ["222"])
        #expect(reset.ops == [.removeSenderData(senderID: "111"), .upsertDevice(core.registry.devices["shared"]!)])
        #expect(core.topics.subscribers(of: .init(senderID: "111", name: "news")).isEmpty)
    }

    @Test func aResetOfEveryDeviceIsTakenBackUnlessADeviceCameSince() {
        var core = Self.core(devices: [("a", .active), ("b", .active)])
        _ = core.topics.add(.init(senderID: "111", name: "news"), token: "a", at: 0)
        let reset = core.resetDevices()
        #expect(reset.count == 2 && core.registry.devices.isEmpty && core.topics.subscribers.isEmpty)
        core.undo(reset)
        #expect(Set(core.registry.devices.keys) == ["a", "b"] && core.topics.subscribers(of: .init(senderID: "111", name: "news")) == ["a"])
        let again = core.resetDevices()
        core.registry.add(DeviceRecord(token: "c", deviceID: "d-c", secret: "s", app: "x", platform: .android, senders: ["111"], createdAt: 1))
        core.undo(again)
        #expect(Set(core.registry.devices.keys) == ["c"], "a device registered since: the newer state stands")
    }

    @Test func aRefreshAddsTheNewestTokenWithinTheLimitAndItsUndoTakesItBack() {
        var core = Self.core()
        guard case .success(let r) = core.refresh("t", to: "t2", limit: 1) else { Issue.record("refreshed"); return }
        #expect(core.registry.installation("t2")?.token == "t" && r.ops == [.upsertDevice(r.after)])
        #expect(core.refresh("t2", to: "t3", limit: 1) == .failure(.tooMany(limit: 1)))
        core.undo(r)
        #expect(core.registry.installation("t2") == nil && core.registry.devices["t"]?.refreshedTokens == [])
        #expect(core.refresh("nobody", to: "x", limit: 1) == .failure(.unknown))
    }
}
