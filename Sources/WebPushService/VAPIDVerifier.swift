import Crypto
import Foundation
import PushDomain

/// Checks a request's Voluntary Application Server Identification (RFC 8292): the JWT is ES256 and
/// signed by the key it names, addressed to the push service's origin, not expired and not more than
/// 24 hours ahead, with a contact. Both header forms: RFC 8292's `Authorization: vapid t=…, k=…` and
/// the drafts' `Authorization: WebPush <JWT>` with `Crypto-Key: p256ecdsa=<key>`.
public enum VAPIDVerifier {
    /// RFC 8292 §2: `exp` no more than 24 hours from the request (FCM refuses later ones).
    public static let maximumLifetimeSeconds: Int64 = 24 * 3600

    /// What a verified request proves: the application server's public key (base64url, as sent).
    public struct Identity: Sendable, Equatable {
        public var publicKey: [UInt8]
        public var subject: String
    }

    public enum Refusal: Error, Equatable, Sendable {
        /// No usable Authorization: 401.
        case missing(String)
        /// A token that does not verify: 401 (RFC 8292 §4.2 answers 403 only for the key mismatch).
        case invalid(String)

        public var reason: String {
            switch self {
            case .missing(let r), .invalid(let r): return r
            }
        }
    }

    /// `cache`: tokens already verified (their claims are checked again, their signature is not).
    public static func verify(authorization: String?, cryptoKey: String?, audience: String,
                              nowSeconds: Int64, cache: VAPIDTokenCache? = nil) -> Result<Identity, Refusal> {
        guard let authorization, !authorization.isEmpty else {
            return .failure(.missing("the request has no Authorization header: send VAPID (RFC 8292), Authorization: vapid t=<JWT>, k=<key>"))
        }
        let token: String, keyText: String
        switch credentials(authorization: authorization, cryptoKey: cryptoKey) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let found): (token, keyText) = found
        }
        if let known = cache?.entry(token: token, key: keyText) {
            return check(known.claims, audience: audience, nowSeconds: nowSeconds).map { Identity(publicKey: known.publicKey, subject: $0) }
        }
        guard let key = Base64URL.decode(keyText), key.count == 65, key[0] == 0x04,
              let publicKey = try? P256.Signing.PublicKey(x963Representation: key) else {
            return .failure(.invalid("the VAPID key (k) must be a base64url uncompressed P-256 public key (65 bytes)"))
        }
        let claims: [String: JSONValue]
        switch verifiedClaims(token, publicKey: publicKey) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let c): claims = c
        }
        cache?.remember(.init(claims: claims, publicKey: key), token: token, key: keyText)
        return check(claims, audience: audience, nowSeconds: nowSeconds).map { Identity(publicKey: key, subject: $0) }
    }

    /// The JWT and the key, from either header form.
    static func credentials(authorization: String, cryptoKey: String?) -> Result<(String, String), Refusal> {
        let trimmed = authorization.trimmingCharacters(in: .whitespaces)
        let lower = trimmed.lowercased()
        if lower.hasPrefix("vapid ") {
            let parameters = String(trimmed.dropFirst(6))
            guard let t = HeaderParameters.value(named: "t", in: parameters),
                  let k = HeaderParameters.value(named: "k", in: parameters) else {
                return .failure(.invalid("Authorization: vapid needs t=<JWT> and k=<public key> (RFC 8292 §3)"))
            }
            return .success((t, k))
        }
        if lower.hasPrefix("webpush ") {
            guard let cryptoKey, let k = HeaderParameters.value(named: "p256ecdsa", in: cryptoKey) else {
                return .failure(.invalid("Authorization: WebPush needs the key in Crypto-Key: p256ecdsa=<public key>"))
            }
            return .success((String(trimmed.dropFirst(8)).trimmingCharacters(in: .whitespaces), k))
        }
        if lower.hasPrefix("key=") {
            return .failure(.invalid("a server key (Authorization: key=…) is for gcm_sender_id subscriptions; this subscription takes VAPID (RFC 8292)"))
        }
        return .failure(.invalid("the Authorization scheme must be vapid (RFC 8292) or WebPush"))
    }

    /// The claims of a compact JWS whose ES256 signature `publicKey` made.
    static func verifiedClaims(_ token: String, publicKey: P256.Signing.PublicKey) -> Result<[String: JSONValue], Refusal> {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(String(parts[0])),
              let claimBytes = Base64URL.decode(String(parts[1])), let signature = Base64URL.decode(String(parts[2])),
              case .object(let header)? = try? JSONValue.parse(String(decoding: headerBytes, as: UTF8.self)),
              case .object(let claims)? = try? JSONValue.parse(String(decoding: claimBytes, as: UTF8.self)) else {
            return .failure(.invalid("the VAPID token is not a JWT (header.claims.signature, base64url JSON)"))
        }
        guard header["alg"]?.stringValue == "ES256" else {
            return .failure(.invalid("the VAPID token's alg must be ES256 (RFC 8292 §2)"))
        }
        // JWS ES256 is r ‖ s (64 bytes); a DER signature is taken too, as some libraries sent it.
        let ecdsa = signature.count == 64 ? try? P256.Signing.ECDSASignature(rawRepresentation: signature)
                                          : try? P256.Signing.ECDSASignature(derRepresentation: signature)
        let signingInput = Data((parts[0] + "." + parts[1]).utf8)
        guard let ecdsa, publicKey.isValidSignature(ecdsa, for: signingInput) else {
            return .failure(.invalid("the VAPID token's signature does not verify with the key given"))
        }
        return .success(claims)
    }

    /// aud, exp and sub (RFC 8292 §2, §2.1); the subject is returned.
    static func check(_ claims: [String: JSONValue], audience: String, nowSeconds: Int64) -> Result<String, Refusal> {
        guard let aud = claims["aud"]?.stringValue else { return .failure(.invalid("the VAPID token has no aud claim")) }
        guard aud == audience else {
            return .failure(.invalid("the VAPID token's aud is \(aud.prefix(200)); it must be the push service's origin, \(audience)"))
        }
        guard let exp = claims["exp"]?.intValue else { return .failure(.invalid("the VAPID token has no numeric exp claim")) }
        guard exp > nowSeconds else { return .failure(.invalid("the VAPID token expired (exp \(exp), now \(nowSeconds))")) }
        guard exp <= nowSeconds + maximumLifetimeSeconds else {
            return .failure(.invalid("the VAPID token's exp is more than 24 hours ahead (exp \(exp), now \(nowSeconds)); RFC 8292 §2"))
        }
        guard let sub = claims["sub"]?.stringValue else {
            return .failure(.invalid("the VAPID token has no sub claim (a mailto: or https: contact)"))
        }
        let lower = sub.lowercased()
        guard (lower.hasPrefix("mailto:") && sub.utf8.count > 7) || (lower.hasPrefix("https://") && sub.utf8.count > 8) else {
            return .failure(.invalid("the VAPID token's sub must be a mailto: or https: URL, it is \(sub.prefix(200))"))
        }
        return .success(sub)
    }
}
