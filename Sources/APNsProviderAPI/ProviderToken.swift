import Crypto
import Foundation
import PushDomain

/// A provider authentication token (an ES256 JWT, "Establishing a token-based connection to APNs"),
/// read and verified against the keys the emulator knows.
public struct ProviderToken: Sendable, Equatable {
    /// Apple refuses a token issued more than an hour ago.
    public static let lifetimeSeconds: Int64 = 3600

    public var key: ProviderKey
    /// `iat`, UNIX seconds.
    public var issuedAt: Int64

    public var teamID: String { key.teamID }

    /// The token of `authorization: bearer <JWT>`, verified: ES256, a known `kid`, `iss` its team, a
    /// good signature, `iat` neither in the future nor older than an hour at `nowSeconds`.
    public static func verify(bearer jwt: Substring, keys: (String) -> ProviderKey?,
                              nowSeconds: Int64) -> Result<ProviderToken, ProviderReason> {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = base64URLDecoded(parts[0]), let claimsBytes = base64URLDecoded(parts[1]),
              let signatureBytes = base64URLDecoded(parts[2]),
              let header = try? JSONValue.parse(String(decoding: headerBytes, as: UTF8.self)),
              let claims = try? JSONValue.parse(String(decoding: claimsBytes, as: UTF8.self)) else {
            return .failure(.invalidProviderToken)
        }
        guard header["alg"]?.stringValue == "ES256", let kid = header["kid"]?.stringValue, let key = keys(kid),
              claims["iss"]?.stringValue == key.teamID, let issuedAt = claims["iat"]?.intValue,
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
              key.publicKey.isValidSignature(signature, for: Data(jwt[..<parts[1].endIndex].utf8)) else {
            return .failure(.invalidProviderToken)
        }
        // A token from the future is not one Apple accepts either (its clock is the reference).
        guard issuedAt <= nowSeconds else { return .failure(.invalidProviderToken) }
        guard nowSeconds - issuedAt <= lifetimeSeconds else { return .failure(.expiredProviderToken) }
        return .success(ProviderToken(key: key, issuedAt: issuedAt))
    }

    public func isExpired(nowSeconds: Int64) -> Bool { nowSeconds - issuedAt > Self.lifetimeSeconds }

    static func base64URLDecoded(_ s: Substring) -> [UInt8]? {
        guard !s.isEmpty, s.utf8.count <= 8192 else { return nil }
        var text = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.utf8.count % 4) % 4)
        return Data(base64Encoded: text).map { Array($0) }
    }
}
