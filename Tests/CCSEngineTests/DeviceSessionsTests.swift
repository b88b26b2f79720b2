@testable import CCSEngine
import DeliveryCore
import PushDomain
import StoreModel
import Testing

/// A device session keeps its own window: what is on the connection, what was confirmed on it, and
/// whether the store holds more than it took; the sessions keep one link per device.
@Suite struct DeviceSessionsTests {
    static func message(_ id: String, collapseKey: String? = nil) -> QueuedMessage {
        QueuedMessage(token: "t", deviceMessageID: id, senderID: "111", appMessageID: "m" + id, collapseKey: collapseKey,
                      priority: "high", timeToLive: 60, enqueuedAt: 0, expiresAt: 60_000,
                      deliveryReceiptRequested: false, delayWhileIdle: false, payload: #"{"data":{"k":"v"}}"#)
    }

    static func take(_ online: inout Engine.OnlineDevice, _ ids: [String], fromBacklog: Bool = true, written: Bool = true,
                     window: Int = 2, removals: inout [StoreOp]) -> [String] {
        online.take(ids.map { message($0) }, fromBacklog: fromBacklog, deviceState: DeviceState(), written: written, window: window,
                    removals: &removals, admit: { _ in true },
                    entry: { m, toTray in Engine.InFlightDownstream(message: m, toTray: toTray) }).map(\.message.deviceMessageID)
    }

    @Test func aNewerConnectionReplacesTheOlderAndTheOldersDisconnectChangesNothing() {
        var sessions = Engine.DeviceSessions()
        let first = FakeDevice(), second = FakeDevice()
        let none = sessions.connect("t", link: first, platform: .android)
        let replaced = sessions.connect("t", link: second, platform: .android)
        #expect(none == nil && replaced === first)
        let olderWentDown = sessions.disconnect("t", link: first)
        #expect(!olderWentDown && sessions.online["t"]?.link === second)
        let changedOlder = sessions.modify("t", link: first) { _ in 1 }
        #expect(changedOlder == nil)
        let newerWentDown = sessions.disconnect("t", link: second)
        #expect(newerWentDown && sessions.online.isEmpty)
    }

    @Test func theWindowTakesWhatFitsAndHoldsTheRestBackUntilABacklogRead() {
        var online = Engine.OnlineDevice(link: FakeDevice(), platform: .android)
        online.backlogRead(holdsAPNsNotification: false)
        var removals: [StoreOp] = []
        #expect(Self.take(&online, ["1", "2", "3"], removals: &removals) == ["1", "2"])
        #expect(online.heldBack)
        // A live hand-over may not overtake what the store holds.
        #expect(Self.take(&online, ["4"], fromBacklog: false, removals: &removals).isEmpty)
        let confirmed = online.confirm("1", window: 2)
        #expect(confirmed?.0.message.deviceMessageID == "1")
        #expect(confirmed?.refill != nil, "the window emptied to half after holding back: read the store again")
        // The backlog read hands over what the window has room for, never "1" again (confirmed).
        #expect(Self.take(&online, ["1", "2", "3", "4"], removals: &removals) == ["3"])
        #expect(online.inFlight.keys.sorted() == ["2", "3"])
        #expect(removals.isEmpty)
    }

    @Test func aConfirmedOfferWrittenAfterAllIsRemovedWhenReadBack() {
        var online = Engine.OnlineDevice(link: FakeDevice(), platform: .android)
        var removals: [StoreOp] = []
        _ = online.take([Self.message("9")], fromBacklog: false, deviceState: DeviceState(), written: false, window: 4,
                        removals: &removals, admit: { _ in true },
                        entry: { m, toTray in Engine.InFlightDownstream(message: m, toTray: toTray, offeredBy: "node-b") })
        _ = online.confirm("9", window: 4)
        #expect(Self.take(&online, ["9"], window: 4, removals: &removals).isEmpty)
        #expect(removals.count == 1)
    }

    @Test func whatTheThrottleRefusesTakesNoRoom() {
        var online = Engine.OnlineDevice(link: FakeDevice(), platform: .android)
        var removals: [StoreOp] = []
        let taken = online.take(["1", "2", "3"].map { Self.message($0) }, fromBacklog: true, deviceState: DeviceState(), written: true,
                                window: 2, removals: &removals, admit: { $0.deviceMessageID != "1" },
                                entry: { m, toTray in Engine.InFlightDownstream(message: m, toTray: toTray) })
        #expect(taken.map(\.message.deviceMessageID) == ["2", "3"])
        #expect(!online.heldBack)
    }

    @Test func dropAllReturnsEveryLinkAndLeavesNoneOnline() {
        var sessions = Engine.DeviceSessions()
        _ = sessions.connect("a", link: FakeDevice(), platform: .android)
        _ = sessions.connect("b", link: FakeDevice(), platform: .ios)
        let links = sessions.dropAll()
        #expect(links.count == 2 && sessions.online.isEmpty)
    }

    @Test func aTapIsClaimedOnceAtATime() {
        var sessions = Engine.DeviceSessions()
        let first = sessions.claimTap("t 1"), second = sessions.claimTap("t 1")
        #expect(first && !second)
        sessions.endTap("t 1")
        let again = sessions.claimTap("t 1")
        #expect(again)
    }
}
