import Crypto
import Foundation
import PushDomain

/// Message encryption for Web Push (RFC 8291, on RFC 8188's `aes128gcm` content coding): what a
/// push service receives is readable only by the browser that holds the subscription's private key.
public enum WebPushEncryption {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The largest plaintext one record carries: FCM (and the RFC) send a single record of at most
    /// 4096 bytes, so 4096 − 16 (tag) − 1 (delimiter) − the header's 86 bytes.
    public static let maximumPlaintextBytes = 4096 - 86 - 16 - 1

    /// The `aes128gcm` body for `plaintext`, encrypted to `subscription`: a header (salt, record
    /// size, the sender's ephemeral public key) and one record. `ephemeral` and `salt` are chosen
    /// at random unless given (tests).
    public static func encrypt(_ plaintext: [UInt8], to subscription: WebPushSubscription,
                               ephemeral: P256.KeyAgreement.PrivateKey = P256.KeyAgreement.PrivateKey(),
                               salt given: [UInt8]? = nil) throws -> [UInt8] {
        guard plaintext.count <= maximumPlaintextBytes else {
            throw Failure(description: "the message is \(plaintext.count) bytes; Web Push carries at most \(maximumPlaintextBytes)")
        }
        guard let uaPublicBytes = Base64URL.decode(subscription.p256dh),
              let authSecret = Base64URL.decode(subscription.auth) else {
            throw Failure(description: "the subscription's keys are not base64url")
        }
        let uaPublic = try P256.KeyAgreement.PublicKey(x963Representation: uaPublicBytes)
        let asPublic = Array(ephemeral.publicKey.x963Representation)
        let shared = try ephemeral.sharedSecretFromKeyAgreement(with: uaPublic)
        // RFC 8291 §3.4: the input keying material from the ECDH secret and the auth secret.
        let keyInfo = Array("WebPush: info".utf8) + [0] + uaPublicBytes + asPublic
        let ikm = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: authSecret, sharedInfo: keyInfo,
                                                 outputByteCount: 32)
        // RFC 8188 §2.2–2.3: the content-encryption key and the nonce, from a random salt.
        let salt = given ?? (0..<16).map { _ in UInt8.random(in: 0 ... .max) }
        let cek = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt,
                                          info: Array("Content-Encoding: aes128gcm".utf8) + [0], outputByteCount: 16)
        let nonceBytes = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt,
                                                 info: Array("Content-Encoding: nonce".utf8) + [0], outputByteCount: 12)
            .withUnsafeBytes { Array($0) }
        // One record, the last: the plaintext then the delimiter 0x02 (no padding).
        let sealed = try AES.GCM.seal(plaintext + [2], using: cek, nonce: AES.GCM.Nonce(data: nonceBytes))
        let recordSize: UInt32 = 4096
        var body = salt
        body += withUnsafeBytes(of: recordSize.bigEndian) { Array($0) }
        body.append(UInt8(asPublic.count))
        body += asPublic
        body += sealed.ciphertext
        body += sealed.tag
        return body
    }
}
