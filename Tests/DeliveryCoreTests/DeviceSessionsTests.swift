@testable import DeliveryCore
import PushDomain
import StoreModel
import Testing

/// A device session keeps its own window: what is on the connection, what was confirmed on it, and
/// whether the store holds more than it took; the sessions keep one connection per device.
@Suite struct DeviceSessionsTests {
    static func message(_ id: String, collapseKey: String? = nil) -> QueuedMessage {
        QueuedMessage(token: "t", deviceMessageID: id, senderID: "111", appMessageID: "m" + id, collapseKey: collapseKey,
                      priority: "high", timeToLive: 60, enqueuedAt: 0, expiresAt: 60_000,
                      deliveryReceiptRequested: false, delayWhileIdle: false, payload: #"{"data":{"k":"v"}}"#)
    }

    static func take(_ online: inout OnlineDevice, _ ids: [String], fromBacklog: Bool = true, written: Bool = true,
                     window: Int = 2, removals: inout [StoreOp]) -> [String] {
        online.take(ids.map { message($0) }, fromBacklog: fromBacklog, deviceState: DeviceState(), written: written, window: window,
                    removals: &removals, admit: { _ in true },
                    entry: { m, toTray in InFlightDownstream(message: m, toTray: toTray) }).map(\.message.deviceMessageID)
    }

    @Test func aNewerConnectionReplacesTheOlderAndTheOldersDisconnectChangesNothing() {
        var sessions = DeviceSessions()
        let first = DeviceConnectionID(1), second = DeviceConnectionID(2)
        let none = sessions.connect("t", connection: first, platform: .android)
        let replaced = sessions.connect("t", connection: second, platform: .android)
        #expect(none == nil && replaced?.connection == first)
        let olderWentDown = sessions.disconnect("t", connection: first)
        #expect(olderWentDown == nil && sessions.online["t"]?.connection == second)
        let changedOlder = sessions.modify("t", connection: first) { _ in 1 }
        #expect(changedOlder == nil)
        let newerWentDown = sessions.disconnect("t", connection: second)
        #expect(newerWentDown?.connection == second && sessions.online.isEmpty)
    }

    @Test func theWindowTakesWhatFitsAndHoldsTheRestBackUntilABacklogRead() {
        var online = OnlineDevice(connection: DeviceConnectionID(1), platform: .android)
        online.backlogRead(holdsAPNsNotification: false)
        var removals: [StoreOp] = []
        #expect(Self.take(&online, ["1", "2", "3"], removals: &removals) == ["1", "2"])
        #expect(online.heldBack)
        // A live hand-over may not overtake what the store holds.
        #expect(Self.take(&online, ["4"], fromBacklog: false, removals: &removals).isEmpty)
        let confirmed = online.confirm("1", window: 2)
        #expect(confirmed?.entry.message.deviceMessageID == "1")
        #expect(confirmed?.refill == DeviceConnectionID(1), "the window emptied to half after holding back: read the store again")
        if let confirmed { online.remember(confirmed.entry, calledOff: false) }
        // The backlog read hands over what the window has room for, never "1" again (confirmed).
        #expect(Self.take(&online, ["1", "2", "3", "4"], removals: &removals) == ["3"])
        #expect(online.inFlight.keys.sorted() == ["2", "3"])
        #expect(removals.isEmpty)
    }

    @Test func aConfirmedOfferWrittenAfterAllIsRemovedWhenReadBack() {
        var online = OnlineDevice(connection: DeviceConnectionID(1), platform: .android)
        var removals: [StoreOp] = []
        _ = online.take([Self.message("9")], fromBacklog: false, deviceState: DeviceState(), written: false, window: 4,
                        removals: &removals, admit: { _ in true },
                        entry: { m, toTray in InFlightDownstream(message: m, toTray: toTray, offeredBy: "node-b") })
        let confirmed = online.confirm("9", window: 4)
        #expect(confirmed?.mayCallOff == nil, "another node's write is that node's to call off")
        if let confirmed { online.remember(confirmed.entry, calledOff: false) }
        #expect(Self.take(&online, ["9"], window: 4, removals: &removals).isEmpty)
        #expect(removals.count == 1)
    }

    @Test func whatTheThrottleRefusesTakesNoRoom() {
        var online = OnlineDevice(connection: DeviceConnectionID(1), platform: .android)
        var removals: [StoreOp] = []
        let taken = online.take(["1", "2", "3"].map { Self.message($0) }, fromBacklog: true, deviceState: DeviceState(), written: true,
                                window: 2, removals: &removals, admit: { $0.deviceMessageID != "1" },
                                entry: { m, toTray in InFlightDownstream(message: m, toTray: toTray) })
        #expect(taken.map(\.message.deviceMessageID) == ["2", "3"])
        #expect(!online.heldBack)
    }

    @Test func dropAllReturnsEveryConnectionAndLeavesNoneOnline() {
        var sessions = DeviceSessions()
        _ = sessions.connect("a", connection: DeviceConnectionID(1), platform: .android)
        _ = sessions.connect("b", connection: DeviceConnectionID(2), platform: .ios)
        let gone = sessions.dropAll()
        #expect(Set(gone.map(\.connection)) == [DeviceConnectionID(1), DeviceConnectionID(2)] && sessions.online.isEmpty)
    }

    @Test func aTapIsClaimedOnceAtATime() {
        var sessions = DeviceSessions()
        let first = sessions.claimTap("t 1"), second = sessions.claimTap("t 1")
        #expect(first && !second)
        sessions.endTap("t 1")
        let again = sessions.claimTap("t 1")
        #expect(again)
    }

    @Test func aConfirmationAsksTheHostToCallOffOnlyAWriteWhoseRemovalStandsAlone() {
        var online = OnlineDevice(connection: DeviceConnectionID(1), platform: .android)
        online.backlogRead(holdsAPNsNotification: false)
        var removals: [StoreOp] = []
        var receipt = Self.message("2")
        receipt.deliveryReceiptRequested = true
        let early = [EarlyDelivery(write: WriteID(1)), EarlyDelivery(write: WriteID(2))]
        var next = 0
        _ = online.take([Self.message("1"), receipt], fromBacklog: false, deviceState: DeviceState(), written: false, window: 4,
                        removals: &removals, admit: { _ in true },
                        entry: { m, toTray in defer { next += 1 }; return InFlightDownstream(message: m, toTray: toTray, early: early[next]) })
        let plain = online.confirm("1", window: 4)
        #expect(plain?.mayCallOff == WriteID(1))
        // A message with a receipt is removed in one commit with the receipt: never called off.
        let withReceipt = online.confirm("2", window: 4)
        #expect(withReceipt != nil && withReceipt?.mayCallOff == nil)
        // Called off: never written, so not remembered; one the writer took is, and is not handed over again.
        if let plain { online.remember(plain.entry, calledOff: true) }
        if let withReceipt { online.remember(withReceipt.entry, calledOff: false) }
        #expect(Self.take(&online, ["1", "2"], window: 4, removals: &removals) == ["1"])
    }
}
