import Crypto
import Foundation
import PushDomain

/// The two content codings a Web Push payload comes in, in the `Content-Encoding` header's words.
public enum PushContentEncoding: String, Sendable, CaseIterable {
    /// RFC 8291 on RFC 8188: salt, record size and the sender's key travel in the body's header.
    case aes128gcm
    /// The drafts before RFC 8291 (draft-ietf-webpush-encryption-04): salt in `Encryption`, the
    /// sender's key in `Crypto-Key: dh=…`; what older app servers (and pywebpush's default) send.
    case aesgcm
}

/// The keys a browser holds for one subscription: what decrypts what is pushed to it.
public struct SubscriptionPrivateKeys: Sendable {
    public let privateKey: P256.KeyAgreement.PrivateKey
    public let authSecret: [UInt8]

    public init(privateKey: P256.KeyAgreement.PrivateKey, authSecret: [UInt8]) {
        self.privateKey = privateKey
        self.authSecret = authSecret
    }

    /// From a stored subscription: nil unless the emulator made it (it then knows the private key).
    public init?(_ subscription: WebPushSubscription) {
        guard let keys = subscription.serviceKeys, let raw = Base64URL.decode(keys.privateKey),
              let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: raw),
              let auth = Base64URL.decode(subscription.auth), auth.count == 16 else { return nil }
        self.init(privateKey: key, authSecret: auth)
    }

    /// A browser's fresh subscription keys: a P-256 key pair and a 16-byte auth secret (RFC 8291 §3.2).
    public static func generate() -> SubscriptionPrivateKeys {
        SubscriptionPrivateKeys(privateKey: P256.KeyAgreement.PrivateKey(),
                                authSecret: (0..<16).map { _ in UInt8.random(in: 0 ... .max) })
    }

    public var publicKeyBytes: [UInt8] { Array(privateKey.publicKey.x963Representation) }
}

/// What the browser does with a pushed body: undo the content coding with the subscription's keys.
/// A value with no state; each failure says why, in words a journal entry can carry.
public enum PushMessageDecryptor {
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    /// `encryptionHeader` / `cryptoKeyHeader`: only for `aesgcm`.
    public static func decrypt(_ body: [UInt8], encoding: PushContentEncoding, keys: SubscriptionPrivateKeys,
                               encryptionHeader: String? = nil, cryptoKeyHeader: String? = nil) throws(Failure) -> [UInt8] {
        switch encoding {
        case .aes128gcm: return try decryptAES128GCM(body, keys: keys)
        case .aesgcm: return try decryptAESGCM(body, keys: keys, encryption: encryptionHeader, cryptoKey: cryptoKeyHeader)
        }
    }

    // MARK: aes128gcm (RFC 8291, RFC 8188)

    static func decryptAES128GCM(_ body: [UInt8], keys: SubscriptionPrivateKeys) throws(Failure) -> [UInt8] {
        // RFC 8188 §2.1: salt (16) ‖ rs (4) ‖ idlen (1) ‖ keyid (idlen), then the records.
        guard body.count >= 21 else { throw Failure("aes128gcm: the body is shorter than its 21-byte header") }
        let salt = Array(body[0..<16])
        let rs = body[16..<20].reduce(0) { $0 << 8 | Int($1) }
        let idLength = Int(body[20])
        // RFC 8188 §2: rs is at least 18 (one byte, the delimiter and the tag).
        guard rs >= 18 else { throw Failure("aes128gcm: the record size \(rs) is under 18") }
        guard idLength == 65, body.count >= 21 + idLength else {
            throw Failure("aes128gcm: the keyid must be the sender's 65-byte P-256 public key (RFC 8291 §4), it is \(idLength) bytes")
        }
        let senderKey = Array(body[21..<(21 + idLength)])
        let sharedSecret = try agree(keys, with: senderKey)
        // RFC 8291 §3.4: IKM from the ECDH secret, keyed by the auth secret.
        let keyInfo = Array("WebPush: info".utf8) + [0] + keys.publicKeyBytes + senderKey
        let ikm = sharedSecret.hkdfDerivedSymmetricKey(using: SHA256.self, salt: keys.authSecret, sharedInfo: keyInfo,
                                                       outputByteCount: 32)
        let cek = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt,
                                          info: Array("Content-Encoding: aes128gcm".utf8) + [0], outputByteCount: 16)
        let nonce = bytes(HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt,
                                                  info: Array("Content-Encoding: nonce".utf8) + [0], outputByteCount: 12))
        let records = Array(body[(21 + idLength)...])
        guard !records.isEmpty else { throw Failure("aes128gcm: the body has a header but no record") }
        var plaintext: [UInt8] = []
        var offset = 0, sequence: UInt64 = 0
        while offset < records.count {
            let end = min(records.count, offset + rs)
            let isLast = end == records.count
            let opened = try open(Array(records[offset..<end]), key: cek, nonce: nonce, sequence: sequence, coding: "aes128gcm")
            plaintext += try unpadAES128GCM(opened, isLast: isLast)
            offset = end
            sequence += 1
        }
        return plaintext
    }

    /// RFC 8188 §2: the data, a delimiter (2 in the last record, 1 before), then zero padding.
    static func unpadAES128GCM(_ record: [UInt8], isLast: Bool) throws(Failure) -> [UInt8] {
        guard let delimiterIndex = record.lastIndex(where: { $0 != 0 }) else {
            throw Failure("aes128gcm: a record has no padding delimiter")
        }
        let expected: UInt8 = isLast ? 2 : 1
        guard record[delimiterIndex] == expected else {
            throw Failure("aes128gcm: a record's padding delimiter is \(record[delimiterIndex]), not \(expected)")
        }
        return Array(record[..<delimiterIndex])
    }

    // MARK: aesgcm (draft-ietf-webpush-encryption-04, draft-ietf-httpbis-encryption-encoding-03)

    static func decryptAESGCM(_ body: [UInt8], keys: SubscriptionPrivateKeys, encryption: String?,
                              cryptoKey: String?) throws(Failure) -> [UInt8] {
        guard let encryption, let saltText = HeaderParameters.value(named: "salt", in: encryption),
              let salt = Base64URL.decode(saltText), salt.count == 16 else {
            throw Failure("aesgcm: the Encryption header must carry salt=<16 bytes, base64url>")
        }
        let rs = HeaderParameters.value(named: "rs", in: encryption).flatMap { Int($0) } ?? 4096
        guard rs > 1, rs <= 1 << 20 else { throw Failure("aesgcm: the Encryption header's rs must be 2 to 1048576") }
        guard let cryptoKey, let dhText = HeaderParameters.value(named: "dh", in: cryptoKey),
              let senderKey = Base64URL.decode(dhText) else {
            throw Failure("aesgcm: the Crypto-Key header must carry dh=<the sender's P-256 public key, base64url>")
        }
        let sharedSecret = try agree(keys, with: senderKey)
        let ikm = sharedSecret.hkdfDerivedSymmetricKey(using: SHA256.self, salt: keys.authSecret,
                                                       sharedInfo: Array("Content-Encoding: auth".utf8) + [0], outputByteCount: 32)
        // The draft's context: "P-256" ‖ 0 ‖ len ‖ receiver key ‖ len ‖ sender key.
        let receiver = keys.publicKeyBytes
        let context = Array("P-256".utf8) + [0, 0, UInt8(receiver.count)] + receiver + [0, UInt8(senderKey.count)] + senderKey
        let cek = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt,
                                          info: Array("Content-Encoding: aesgcm".utf8) + [0] + context, outputByteCount: 16)
        let nonce = bytes(HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt,
                                                  info: Array("Content-Encoding: nonce".utf8) + [0] + context, outputByteCount: 12))
        guard !body.isEmpty else { throw Failure("aesgcm: the body is empty") }
        var plaintext: [UInt8] = []
        var offset = 0, sequence: UInt64 = 0
        while offset < body.count {
            let end = min(body.count, offset + rs + 16)
            let opened = try open(Array(body[offset..<end]), key: cek, nonce: nonce, sequence: sequence, coding: "aesgcm")
            // Each record: a 2-byte padding length, that many zeros, then the data.
            guard opened.count >= 2 else { throw Failure("aesgcm: a record is shorter than its padding length") }
            let padding = Int(opened[0]) << 8 | Int(opened[1])
            guard opened.count >= 2 + padding else { throw Failure("aesgcm: a record's padding is longer than the record") }
            plaintext += opened[(2 + padding)...]
            offset = end
            sequence += 1
        }
        return plaintext
    }

    // MARK: Shared

    static func agree(_ keys: SubscriptionPrivateKeys, with senderKey: [UInt8]) throws(Failure) -> SharedSecret {
        do {
            let sender = try P256.KeyAgreement.PublicKey(x963Representation: senderKey)
            return try keys.privateKey.sharedSecretFromKeyAgreement(with: sender)
        } catch {
            throw Failure("the sender's public key is not a P-256 point")
        }
    }

    /// One record: the nonce is the base nonce XOR the record's sequence number (RFC 8188 §2.3).
    static func open(_ record: [UInt8], key: SymmetricKey, nonce base: [UInt8], sequence: UInt64,
                     coding: String) throws(Failure) -> [UInt8] {
        guard record.count > 16 else { throw Failure("\(coding): a record is shorter than its 16-byte tag") }
        var nonce = base
        for i in 0..<8 { nonce[11 - i] ^= UInt8((sequence >> (8 * UInt64(i))) & 0xFF) }
        do {
            let box = try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: nonce), ciphertext: record.dropLast(16),
                                            tag: record.suffix(16))
            return Array(try AES.GCM.open(box, using: key))
        } catch {
            throw Failure("\(coding): the payload does not decrypt with the subscription's keys (record \(sequence))")
        }
    }

    static func bytes(_ key: SymmetricKey) -> [UInt8] { key.withUnsafeBytes { Array($0) } }
}

/// `name=value` parameters of a header such as `Encryption: salt=…; rs=4096` or
/// `Crypto-Key: dh=…;p256ecdsa=…` (separated by `;` or `,`, quotes allowed).
public enum HeaderParameters {
    public static func value(named name: String, in header: String) -> String? {
        for part in header.split(whereSeparator: { $0 == ";" || $0 == "," }) {
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces).lowercased() == name else { continue }
            return pair[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        return nil
    }
}
