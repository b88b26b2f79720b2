@testable import DeliveryCore
import StoreModel
import Testing

/// Each admission rule holds back only what its platform behaviour does, on its own.
@Suite struct AdmissionRuleTests {
    static func message(priority: String = "normal", delayWhileIdle: Bool = false, payload: String = #"{"data":{"k":"v"}}"#) -> QueuedMessage {
        QueuedMessage(token: "t", deviceMessageID: "0:1", senderID: "111", appMessageID: "m", collapseKey: nil,
                      priority: priority, timeToLive: 60, enqueuedAt: 0, expiresAt: 60_000,
                      deliveryReceiptRequested: false, delayWhileIdle: delayWhileIdle, payload: payload)
    }

    @Test func dozeHoldsBackAllButHighPriorityWithoutDelayWhileIdle() {
        let idle = DeviceState(foreground: true, idle: true)
        #expect(AdmissionRule.doze.holdsBack(Self.message(), state: idle, platform: .android))
        #expect(AdmissionRule.doze.holdsBack(Self.message(priority: "high", delayWhileIdle: true), state: idle, platform: .android))
        #expect(!AdmissionRule.doze.holdsBack(Self.message(priority: "high"), state: idle, platform: .android))
        #expect(!AdmissionRule.doze.holdsBack(Self.message(), state: DeviceState(), platform: .android))
        #expect(!idle.admits(Self.message(), platform: .android))
        #expect(idle.admits(Self.message(priority: "high"), platform: .android))
    }

    @Test func anIOSAppInTheBackgroundIsHeldBackOnlyForPlainData() {
        let background = DeviceState(foreground: false, idle: false)
        let alert = Self.message(payload: #"{"notification":{"title":"t","body":"b"}}"#)
        #expect(AdmissionRule.iosBackgroundData.holdsBack(Self.message(), state: background, platform: .ios))
        #expect(!AdmissionRule.iosBackgroundData.holdsBack(alert, state: background, platform: .ios))
        #expect(!AdmissionRule.iosBackgroundData.holdsBack(Self.message(), state: background, platform: .android))
        #expect(!AdmissionRule.iosBackgroundData.holdsBack(Self.message(), state: DeviceState(), platform: .ios))
        #expect(!background.admits(Self.message(), platform: .ios))
        #expect(background.admits(alert, platform: .ios))
    }
}
