import Crypto
import Foundation
import PushDomain

/// What a Google ID token says about its user (OpenID Connect's claims, as Google's sign-in issues them).
public struct IDTokenClaims: Sendable, Equatable {
    public var email: String
    /// The user's stable id (`sub`): derived from the email, so that one user is one subject.
    public var subject: String
    /// The OAuth client the token was issued for (`aud`): for the client-side device-group API, the
    /// app server's web client id (`audience:server:client_id:…` on Android).
    public var audience: String
    /// Engine-clock seconds.
    public var issuedAt: Int64
    public var expiresAt: Int64
}

public enum IDTokenError: Error, Sendable, Equatable {
    /// Not a JWT this emulator signed (wrong form, algorithm, key or signature, or a claim missing).
    case invalid
    case expired
}

/// Issues and verifies Google ID tokens for the client-side device-group API
/// (`POST /gcm/googlenotification`): JWTs signed ES256 (RFC 7518 §3.4) by a P-256 key the emulator
/// keeps in `DATA_DIR/credentials/id-token-key.pem` (mode 0600), issuer `https://accounts.google.com`
/// as Google's, expiring on the engine's clock (the virtual clock included). Only tokens this key
/// signed are accepted: a real Google ID token is not (the emulator cannot reach Google's keys).
public struct IDTokenIssuer: Sendable {
    /// Google's ID tokens live an hour.
    public static let lifetimeSeconds: Int64 = 3600
    public static let issuer = "https://accounts.google.com"
    /// Longer than any token this issuer makes: nothing longer is decoded.
    static let maximumLength = 4096
    /// The longest email and audience accepted, in UTF-8 bytes.
    public static let maximumClaimBytes = 256

    private let key: P256.Signing.PrivateKey
    /// `kid`: the first 16 hex digits of the public key's SHA-256.
    public let keyID: String

    public init(key: P256.Signing.PrivateKey) {
        self.key = key
        keyID = SHA256.hash(data: key.publicKey.rawRepresentation).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// An issuer with a fresh key, kept in memory only (tests).
    public init() { self.init(key: P256.Signing.PrivateKey()) }

    /// The issuer whose key is in `directory/id-token-key.pem` (created, mode 0600, when missing).
    public init(keyIn directory: String) throws(CredentialsError) {
        let path = directory + "/id-token-key.pem"
        if let pem = try? String(contentsOfFile: path, encoding: .utf8) {
            do { self.init(key: try P256.Signing.PrivateKey(pemRepresentation: pem)) } catch {
                throw CredentialsError("\(path) holds no P-256 private key: \(error)")
            }
            return
        }
        let fresh = P256.Signing.PrivateKey()
        let temporary = path + ".\(getpid()).tmp"
        unlink(temporary)
        try PrivateFile.create(atPath: temporary, contents: Data(fresh.pemRepresentation.utf8))
        // link(2) fails if another process made the key first: then that one is used.
        if link(temporary, path) != 0 {
            unlink(temporary)
            guard let pem = try? String(contentsOfFile: path, encoding: .utf8),
                  let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) else {
                throw CredentialsError("cannot create \(path) (errno \(errno))")
            }
            self.init(key: key)
            return
        }
        unlink(temporary)
        self.init(key: fresh)
    }

    /// A token for `email`, issued at `nowSeconds` (the engine's clock), valid for `lifetimeSeconds`.
    public func issue(email: String, audience: String, nowSeconds: Int64, lifetimeSeconds: Int64 = lifetimeSeconds) -> String {
        let header = JSONValue.object(["alg": "ES256", "typ": "JWT", "kid": .string(keyID)]).encoded()
        let claims = JSONValue.object([
            "iss": .string(Self.issuer), "aud": .string(audience), "azp": .string(audience),
            "sub": .string(Self.subject(of: email)), "email": .string(email), "email_verified": .bool(true),
            "iat": .int(nowSeconds), "exp": .int(nowSeconds + lifetimeSeconds),
        ]).encoded()
        let signingInput = Base64URL.encode(Data(header.utf8)) + "." + Base64URL.encode(Data(claims.utf8))
        // Signing a digest cannot fail for a valid key.
        let signature = try! key.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// The claims of `token`, if this issuer signed it and it has not expired at `nowSeconds`.
    public func verify(_ token: String, nowSeconds: Int64) -> Result<IDTokenClaims, IDTokenError> {
        guard token.utf8.count <= Self.maximumLength else { return .failure(.invalid) }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
              let signatureBytes = Base64URL.decode(parts[2]),
              let header = try? JSONValue.parse(String(decoding: headerBytes, as: UTF8.self)),
              header["alg"]?.stringValue == "ES256",
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
              key.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)),
              let claims = try? JSONValue.parse(String(decoding: claimBytes, as: UTF8.self)),
              claims["iss"]?.stringValue == Self.issuer,
              let email = claims["email"]?.stringValue, let subject = claims["sub"]?.stringValue,
              let audience = claims["aud"]?.stringValue,
              let issuedAt = claims["iat"]?.intValue, let expiresAt = claims["exp"]?.intValue
        else { return .failure(.invalid) }
        if nowSeconds >= expiresAt { return .failure(.expired) }
        return .success(IDTokenClaims(email: email, subject: subject, audience: audience, issuedAt: issuedAt, expiresAt: expiresAt))
    }

    /// Google's subjects are decimal numbers of 21 digits; this one is the email's SHA-256, read as one.
    static func subject(of email: String) -> String {
        let digest = SHA256.hash(data: Data(email.lowercased().utf8))
        let value = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return "1" + String(String(value).suffix(20)).leftPadded(to: 20)
    }
}

private extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
