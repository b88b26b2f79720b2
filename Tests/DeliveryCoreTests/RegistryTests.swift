@testable import DeliveryCore
import PushDomain
import StoreModel
import Testing

/// The registry keeps its five device maps in step: every index points at a record it holds, and a
/// removed installation leaves nothing behind.
@Suite struct RegistryTests {
    static func record(_ token: String, device: String, apns: String? = nil, refreshed: [String] = [],
                       status: DeviceStatus = .active) -> DeviceRecord {
        DeviceRecord(token: token, deviceID: device, secret: "s", app: "com.example", platform: .ios, senders: ["111"],
                     createdAt: 0, status: status, apnsToken: apns, refreshedTokens: refreshed)
    }

    /// Every index of `r` names a record it holds, with the same key.
    static func consistent(_ r: Registry) -> Bool {
        r.tokenByDeviceID.allSatisfy { r.devices[$0.value]?.deviceID == $0.key }
            && r.apnsTokens.allSatisfy { r.devices[$0.value]?.apnsToken == $0.key }
            && r.aliases.allSatisfy { r.devices[$0.value]?.refreshedTokens.contains($0.key) == true }
            && Set(r.deviceStates.keys) == Set(r.devices.keys)
    }

    @Test func addIndexesEveryWayToFindAnInstallation() {
        var r = Registry()
        r.add(Self.record("t1", device: "d1", apns: "aa", refreshed: ["t1b"]))
        #expect(r.installation("t1b")?.token == "t1")
        #expect(r.holder(ofAPNsToken: "aa")?.token == "t1")
        #expect(r.tokenByDeviceID["d1"] == "t1")
        #expect(Self.consistent(r))
    }

    @Test func removeLeavesNoIndexBehind() {
        var r = Registry()
        r.add(Self.record("t1", device: "d1", apns: "aa", refreshed: ["t1b"]))
        r.remove("t1")
        #expect(r.devices.isEmpty && r.deviceStates.isEmpty && r.tokenByDeviceID.isEmpty)
        #expect(r.apnsTokens.isEmpty && r.aliases.isEmpty)
    }

    @Test func aNewerRegistrationWinsTheAPNsTokenAndAnUpdateOfTheOlderDoesNotTakeItBack() {
        var r = Registry()
        r.add(Self.record("old", device: "d1", apns: "aa"))
        r.add(Self.record("new", device: "d2", apns: "aa"))
        r.update(Self.record("old", device: "d1", apns: "aa", status: .uninstalled))
        #expect(r.holder(ofAPNsToken: "aa")?.token == "new")
        // Removing the older one keeps the newer one's index.
        r.remove("old")
        #expect(r.holder(ofAPNsToken: "aa")?.token == "new")
        #expect(Self.consistent(r))
    }

    @Test func anUpdateThatDropsARefreshedTokenDropsItsAlias() {
        var r = Registry()
        r.add(Self.record("t1", device: "d1"))
        r.update(Self.record("t1", device: "d1", refreshed: ["t2"]))
        #expect(r.installation("t2")?.token == "t1")
        r.update(Self.record("t1", device: "d1"))
        #expect(r.installation("t2") == nil)
        #expect(Self.consistent(r))
    }

    @Test func addingARecordAgainReplacesItsIndexes() {
        var r = Registry()
        r.add(Self.record("t1", device: "d1", apns: "aa", refreshed: ["t1b"]))
        r.add(Self.record("t1", device: "d9", apns: "bb"))
        #expect(r.tokenByDeviceID["d1"] == nil && r.apnsTokens["aa"] == nil && r.aliases["t1b"] == nil)
        #expect(r.tokenByDeviceID["d9"] == "t1" && r.apnsTokens["bb"] == "t1")
        #expect(Self.consistent(r))
    }

    @Test func restoringDevicesKeepsSendersProvisionedSince() {
        var r = Registry()
        r.add(Self.record("t1", device: "d1"))
        let before = r
        r.removeAllDevices()
        r.setSender(SenderRecord(senderID: "222", serverKey: "k", createdAt: 0))
        r.restoreDevices(from: before)
        #expect(r.devices["t1"] != nil && r.senders["222"] != nil)
    }

    @Test func theStateIsDecodedFromTheRecordUnlessGiven() {
        var r = Registry()
        var rec = Self.record("t1", device: "d1")
        rec.state = DeviceState(foreground: false, idle: true).json
        r.add(rec)
        #expect(r.deviceStates["t1"]?.idle == true && r.deviceStates["t1"]?.foreground == false)
        r.update(rec, state: DeviceState(foreground: true, idle: false))
        #expect(r.deviceStates["t1"]?.idle == false)
    }
}
