import Crypto
import Foundation
import PushDomain
import Testing
@testable import WebPushService

@Suite struct PushMessageDecryptorTests {
    @Test func decryptsWhatTheEmulatorsSenderEncrypts() throws {
        let f = PushFixtures()
        let largest = Array(repeating: UInt8(ascii: "x"), count: WebPushEncryption.maximumPlaintextBytes)
        let body = try WebPushEncryption.encrypt(largest, to: f.subscription())
        #expect(body.count == 4096)
        #expect(try PushMessageDecryptor.decrypt(body, encoding: .aes128gcm, keys: f.browser) == largest)
    }

    @Test func recordsAfterTheFirstUseTheNextNonce() throws {
        let f = PushFixtures()
        let body = try f.aes128gcm(records: [Array("first ".utf8), Array("second ".utf8), Array("third".utf8)], rs: 40)
        #expect(try PushMessageDecryptor.decrypt(body, encoding: .aes128gcm, keys: f.browser) == Array("first second third".utf8))
        var truncated = body
        truncated.removeLast(17)
        #expect(throws: PushMessageDecryptor.Failure.self) { try PushMessageDecryptor.decrypt(truncated, encoding: .aes128gcm, keys: f.browser) }
        // A last record of nothing but its delimiter is allowed (RFC 8188 §2).
        let cut = try f.aes128gcm(records: [Array("only".utf8), []], rs: 40)
        #expect(try PushMessageDecryptor.decrypt(cut, encoding: .aes128gcm, keys: f.browser) == Array("only".utf8))
    }

    @Test func shortAndOddBodiesFailWithAReason() {
        let keys = SubscriptionPrivateKeys.generate()
        for body: [UInt8] in [[], [1, 2, 3], Array(repeating: 0, count: 21), Array(repeating: 0, count: 16) + [0, 0, 0x10, 0, 65] + Array(repeating: 4, count: 65)] {
            #expect(throws: PushMessageDecryptor.Failure.self) { try PushMessageDecryptor.decrypt(body, encoding: .aes128gcm, keys: keys) }
        }
        #expect(throws: PushMessageDecryptor.Failure.self) {
            try PushMessageDecryptor.decrypt([1, 2], encoding: .aesgcm, keys: keys, encryptionHeader: "salt=AAAAAAAAAAAAAAAAAAAAAA; rs=0",
                                             cryptoKeyHeader: "dh=AAAA")
        }
    }

    @Test func aesgcmDecrypts() throws {
        let f = PushFixtures()
        let (body, encryption, dh) = try f.aesgcm("{\"notification\":{\"title\":\"Hi\"}}")
        let plain = try PushMessageDecryptor.decrypt(body, encoding: .aesgcm, keys: f.browser, encryptionHeader: encryption,
                                                     cryptoKeyHeader: "p256ecdsa=BBBB, " + dh)
        #expect(PushEventView.json(plaintext: plain, hasPayload: true)["notification"]?["title"]?.stringValue == "Hi")
    }

    @Test func thePushEventShowsDataAndTheNotification() {
        #expect(PushEventView.json(plaintext: [], hasPayload: false) == .object(["data": .null]))
        let flat = PushEventView.json(plaintext: Array(#"{"title":"T","body":"B","x":1}"#.utf8), hasPayload: true)
        #expect(flat["notification"] == .object(["title": "T", "body": "B"]))
        #expect(PushEventView.json(plaintext: Array("plain".utf8), hasPayload: true) == .object(["data": "plain"]))
        #expect(PushEventView.json(plaintext: [0xFF], hasPayload: true)["data_base64url"] == "_w")
    }

    @Test func subscriptionKeysSurviveTheStoresJSON() throws {
        var f = PushFixtures()
        f.applicationServerKey = VAPIDFixture.otherKey
        let stored = f.subscription().storedJSON
        let back = try WebPushSubscription.parse(try JSONValue.parse(stored.encoded())).get()
        #expect(back == f.subscription())
        #expect(SubscriptionPrivateKeys(back)?.publicKeyBytes == f.browser.publicKeyBytes)
        #expect(f.subscription().json["emulator_push_service"] == nil && f.subscription().browserJSON["expirationTime"] == .null)
        #expect(back.endpointOrigin == "https://fcm.googleapis.com" && back.isServedByEmulator)
    }
}
