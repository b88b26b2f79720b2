import CCSProtocol
import PushDomain
import Testing
import WebPushService
@testable import DeviceSimulator

/// The simulated browser's side of Web Push: a message delivered still encrypted becomes the service
/// worker's `push` event, decrypted with the subscription's private key.
@Suite struct PushEventTests {
    let keys = SubscriptionPrivateKeys.generate()

    var subscription: WebPushSubscription {
        WebPushSubscription(endpoint: "https://fcm.googleapis.com/fcm/send/t", p256dh: Base64URL.encode(keys.publicKeyBytes),
                            auth: Base64URL.encode(keys.authSecret))
    }

    func delivered(_ text: String) throws -> JSONValue {
        let body = try WebPushEncryption.encrypt(Array(text.utf8), to: subscription)
        let data = PushedMessage(encoding: .aes128gcm, body: body).data
        return .object(["message_id": "0:1%ab", "data": .object(data.mapValues { .string($0) })])
    }

    @Test func aDeliveredMessageBecomesAPushEvent() throws {
        let message = try delivered(#"{"title":"Goal","body":"1-0"}"#)
        let pushed = try #require(PushedMessage(data: message["data"]))
        let event = DeviceSession.pushEvent(pushed, message: message, keys: keys)
        #expect(event["event"] == "push" && event["message_id"] == "0:1%ab")
        #expect(event["data"] == .string(#"{"title":"Goal","body":"1-0"}"#))
        #expect(event["notification"] == .object(["title": "Goal", "body": "1-0"]))
    }

    @Test func anotherBrowsersKeysGiveAPushError() throws {
        let message = try delivered("secret")
        let pushed = try #require(PushedMessage(data: message["data"]))
        let event = DeviceSession.pushEvent(pushed, message: message, keys: SubscriptionPrivateKeys.generate())
        #expect(event["event"] == "push_error" && event["data"] == nil)
    }

    @Test func anOrdinaryDataMessageIsNotAPush() {
        #expect(PushedMessage(data: .object(["hello": "world"])) == nil)
        #expect(PushedMessage(data: .object(["webpush_body": "!!"])) == nil)
    }
}
