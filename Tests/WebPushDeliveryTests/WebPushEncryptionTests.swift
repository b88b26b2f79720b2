import Crypto
import Foundation
import PushDomain
import Testing
import WebPushService

/// RFC 8291 as the browser reads it: the test plays the user agent, with its own private key.
@Suite struct WebPushEncryptionTests {
    struct Browser {
        let key = P256.KeyAgreement.PrivateKey()
        let auth: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0 ... .max) }
        var subscription: WebPushSubscription {
            WebPushSubscription(endpoint: "https://push.example/abc", p256dh: Base64URL.encode(key.publicKey.x963Representation),
                                auth: Base64URL.encode(auth))
        }

        /// RFC 8188 decryption of a single-record body, from the receiving side's keys.
        func decrypt(_ body: [UInt8]) throws -> [UInt8] {
            let salt = Array(body[0..<16])
            let recordSize = body[16..<20].reduce(0) { $0 << 8 | Int($1) }
            let idLength = Int(body[20])
            let senderKey = Array(body[21..<(21 + idLength)])
            let record = Array(body[(21 + idLength)...])
            #expect(recordSize == 4096 && record.count <= recordSize)
            let shared = try key.sharedSecretFromKeyAgreement(with: P256.KeyAgreement.PublicKey(x963Representation: senderKey))
            let info = Array("WebPush: info".utf8) + [0] + Array(key.publicKey.x963Representation) + senderKey
            let ikm = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: auth, sharedInfo: info, outputByteCount: 32)
            let cek = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt,
                                              info: Array("Content-Encoding: aes128gcm".utf8) + [0], outputByteCount: 16)
            let nonce = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt,
                                                info: Array("Content-Encoding: nonce".utf8) + [0], outputByteCount: 12)
                .withUnsafeBytes { Array($0) }
            let box = try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: nonce), ciphertext: record.dropLast(16),
                                            tag: record.suffix(16))
            var plain = Array(try AES.GCM.open(box, using: cek))
            #expect(plain.last == 2)  // the last record's delimiter
            plain.removeLast()
            return plain
        }
    }

    @Test func theBrowserReadsWhatWasEncryptedToItsSubscription() throws {
        let browser = Browser()
        let message = Array(#"{"data":{"k":"v"},"from":"123"}"#.utf8)
        let body = try WebPushEncryption.encrypt(message, to: browser.subscription)
        #expect(try browser.decrypt(body) == message)
        // A fresh key and salt per message: the same text never looks the same twice.
        #expect(try WebPushEncryption.encrypt(message, to: browser.subscription) != body)
    }

    @Test func aMessageTooBigForOneRecordOrBadKeysAreRefused() {
        let browser = Browser()
        #expect(throws: WebPushEncryption.Failure.self) {
            _ = try WebPushEncryption.encrypt([UInt8](repeating: 65, count: WebPushEncryption.maximumPlaintextBytes + 1),
                                              to: browser.subscription)
        }
        #expect((try? WebPushEncryption.encrypt([UInt8](repeating: 65, count: WebPushEncryption.maximumPlaintextBytes),
                                                to: browser.subscription))?.count == 4096)  // RFC 8291 §4: a push service takes 4096
        var broken = browser.subscription
        broken.p256dh = Base64URL.encode([4] + [UInt8](repeating: 1, count: 64))  // not a point on the curve
        #expect(throws: (any Error).self) { _ = try WebPushEncryption.encrypt([1], to: broken) }
    }

    @Test func theVAPIDTokenIsSignedForTheEndpointsOrigin() throws {
        let key = VAPIDKey(privateKey: P256.Signing.PrivateKey())
        let header = try key.authorization(endpoint: "https://push.example:8443/a/b?c", nowMillis: 1_700_000_000_000)
        #expect(header.hasPrefix("vapid t=") && header.hasSuffix(", k=" + key.publicKeyBase64URL))
        let jwt = String(header.dropFirst("vapid t=".count).prefix { $0 != "," })
        let parts = jwt.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        let claims = try JSONValue.parse(String(decoding: try #require(Base64URL.decode(parts[1])), as: UTF8.self))
        #expect(claims["aud"]?.stringValue == "https://push.example:8443")
        #expect(claims["exp"] == .int(1_700_000_000 + 12 * 3600))
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: try #require(Base64URL.decode(parts[2])))
        #expect(key.privateKey.publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)))
    }

    @Test func base64URLRoundTrips() {
        for n in 0..<40 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(text) == bytes)
        }
    }
}
