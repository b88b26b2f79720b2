import CCSProtocol
import PushDomain
import Testing
@testable import XMPPServer

/// How the CCS front end words the engine's refusals (docs/semantics.md, "NACK codes").
@Suite struct SendErrorNackTests {
    @Test func aRateRefusalIsDeviceMessageRateExceededWithGooglesText() {
        let nack = Nack(messageID: "m1", from: "tok", refusal: .deviceMessageRateExceeded(token: "tok", retryAfterMillis: 250))
        #expect(nack.code == .deviceMessageRateExceeded)
        #expect(nack.description == "Downstream message rate exceeded for this registration id")
        #expect(nack.from == "tok" && nack.messageID == "m1")
    }

    @Test func aTopicRateRefusalIsTopicsMessageRateExceeded() {
        let nack = Nack(messageID: "m2", from: "/topics/news", refusal: .topicsMessageRateExceeded(topic: "news", retryAfterMillis: 250))
        #expect(nack.code == .topicsMessageRateExceeded)
        #expect(nack.description == "Topics message rate exceeded")
        #expect(nack.from == "/topics/news")
    }

    @Test func aGroupNoMemberTookIsNackedForItsMostRetryableReason() {
        func code(_ errors: [SendError]) -> NackCode {
            let failed = errors.enumerated().map { (token: "t\($0.offset)", error: $0.element) }
            return Nack(messageID: "g", groupOutcome: GroupSendOutcome(notificationKey: "key", success: 0, failed: failed)).code
        }
        let rate = SendError.deviceMessageRateExceeded(token: "t0", retryAfterMillis: 1000)
        #expect(code([.unregistered(token: "t0"), rate]) == .deviceMessageRateExceeded)
        #expect(code([rate, .unavailable]) == .serviceUnavailable)
        #expect(code([.unregistered(token: "t0"), .invalidRegistration(token: "t1")]) == .deviceUnregistered)
        #expect(code([.senderMismatch(token: "t0", sender: "1")]) == .badRegistration)
    }
}
