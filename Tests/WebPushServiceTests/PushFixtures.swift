import Crypto
import Foundation
import PushDomain
@testable import WebPushService

/// A browser's subscription the emulator serves, and an application server that posts to it: the
/// sending side is `WebPushDelivery`'s (the emulator's own RFC 8291/8292 sender), so each test
/// checks one implementation against the other.
struct PushFixtures {
    let browser = SubscriptionPrivateKeys.generate()
    let server = VAPIDKey(privateKey: P256.Signing.PrivateKey())
    var applicationServerKey: String?
    static let now: Int64 = 1_800_000_000

    func subscription(token: String = "tok") -> WebPushSubscription {
        WebPushSubscription(endpoint: "https://fcm.googleapis.com/fcm/send/" + token,
                            p256dh: Base64URL.encode(browser.publicKeyBytes), auth: Base64URL.encode(browser.authSecret),
                            serviceKeys: .init(privateKey: Base64URL.encode(browser.privateKey.rawRepresentation),
                                               applicationServerKey: applicationServerKey))
    }

    func request(_ text: String = "hello", ttl: String? = "60") throws -> PushRequest {
        let body = try WebPushEncryption.encrypt(Array(text.utf8), to: subscription())
        let authorization = try server.authorization(endpoint: subscription().endpoint, nowMillis: Self.now * 1000)
        return PushRequest(ttl: ttl, contentEncoding: "aes128gcm", authorization: authorization, body: body)
    }

    func validate(_ request: PushRequest, _ standing: SubscriptionStanding? = nil) -> Result<AcceptedPushMessage, PushRefusal> {
        PushRequestValidator.validate(request, subscription: standing ?? .active(subscription()),
                                      audience: "https://fcm.googleapis.com", nowSeconds: Self.now)
    }

    /// A compact ES256 JWT with these claims, signed by `key`.
    static func jwt(_ claims: JSONValue, key: P256.Signing.PrivateKey, alg: String = "ES256") throws -> String {
        let header = Base64URL.encode(Array(#"{"typ":"JWT","alg":"\#(alg)"}"#.utf8))
        let input = header + "." + Base64URL.encode(Array(claims.encoded().utf8))
        let signature = try key.signature(for: Data(input.utf8)).rawRepresentation
        return input + "." + Base64URL.encode(signature)
    }

    func vapid(aud: String = "https://fcm.googleapis.com", exp: Int64 = now + 3600, sub: String? = "mailto:a@example.com") throws -> String {
        var claims: [String: JSONValue] = ["aud": .string(aud), "exp": .int(exp)]
        if let sub { claims["sub"] = .string(sub) }
        let token = try Self.jwt(.object(claims), key: server.privateKey)
        return "vapid t=\(token), k=\(server.publicKeyBase64URL)"
    }

    /// The drafts' `aesgcm` as an app server encrypts it (draft-ietf-webpush-encryption-04): one
    /// record with 2 bytes of padding length; the salt and key go in headers.
    func aesgcm(_ text: String) throws -> (body: [UInt8], encryption: String, cryptoKey: String) {
        let sender = P256.KeyAgreement.PrivateKey()
        let senderKey = Array(sender.publicKey.x963Representation)
        let salt = (0..<16).map { _ in UInt8.random(in: 0 ... .max) }
        let shared = try sender.sharedSecretFromKeyAgreement(with: browser.privateKey.publicKey)
        let ikm = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: browser.authSecret,
                                                 sharedInfo: Array("Content-Encoding: auth".utf8) + [0], outputByteCount: 32)
        let receiver = browser.publicKeyBytes
        let context = Array("P-256".utf8) + [0, 0, 65] + receiver + [0, 65] + senderKey
        let cek = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt,
                                          info: Array("Content-Encoding: aesgcm".utf8) + [0] + context, outputByteCount: 16)
        let nonce = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt,
                                            info: Array("Content-Encoding: nonce".utf8) + [0] + context, outputByteCount: 12)
            .withUnsafeBytes { Array($0) }
        let sealed = try AES.GCM.seal([0, 0] + Array(text.utf8), using: cek, nonce: AES.GCM.Nonce(data: nonce))
        return (Array(sealed.ciphertext) + Array(sealed.tag), "salt=" + Base64URL.encode(salt),
                "dh=" + Base64URL.encode(senderKey))
    }
}

extension PushFixtures {
    /// RFC 8188 by hand with several records of size `rs`: each chunk one record (delimiter 1, the
    /// last 2, zero-padded to fill all but the last), the nonce XORed with the record's number.
    func aes128gcm(records chunks: [[UInt8]], rs: Int) throws -> [UInt8] {
        let sender = P256.KeyAgreement.PrivateKey()
        let senderKey = Array(sender.publicKey.x963Representation)
        let salt = (0..<16).map { _ in UInt8.random(in: 0 ... .max) }
        let shared = try sender.sharedSecretFromKeyAgreement(with: browser.privateKey.publicKey)
        let info = Array("WebPush: info".utf8) + [0] + browser.publicKeyBytes + senderKey
        let ikm = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: browser.authSecret, sharedInfo: info, outputByteCount: 32)
        let cek = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt,
                                          info: Array("Content-Encoding: aes128gcm".utf8) + [0], outputByteCount: 16)
        let base = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt,
                                           info: Array("Content-Encoding: nonce".utf8) + [0], outputByteCount: 12)
            .withUnsafeBytes { Array($0) }
        var body = salt + [UInt8(rs >> 24 & 0xFF), UInt8(rs >> 16 & 0xFF), UInt8(rs >> 8 & 0xFF), UInt8(rs & 0xFF), 65] + senderKey
        for (i, chunk) in chunks.enumerated() {
            let last = i == chunks.count - 1
            var plain = chunk + [last ? 2 : 1]
            if !last { plain += Array(repeating: 0, count: rs - 16 - plain.count) }
            var nonce = base
            nonce[11] ^= UInt8(i)
            let sealed = try AES.GCM.seal(plain, using: cek, nonce: AES.GCM.Nonce(data: nonce))
            body += Array(sealed.ciphertext) + Array(sealed.tag)
        }
        return body
    }
}
