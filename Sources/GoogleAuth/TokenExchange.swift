import Foundation
import JWTKit
import PushDomain

/// Google's OAuth2 token endpoint for service accounts: the JWT-bearer grant (RFC 7523) that every
/// admin SDK makes before its first v1 call.
///
/// The assertion is an RS256 JWT whose header names the key (`kid` = `private_key_id`) and whose
/// claims are `iss` (the service account's e-mail), `aud` (Google's token URL, even when the
/// service-account file's `token_uri` points here), `scope`, `iat` and `exp`. With
/// `verifiesSignatures` (`--auth strict`) the key must be one this emulator issued and the
/// signature must hold; otherwise any well-formed assertion is taken.
public struct TokenExchange: Sendable {
    public static let jwtBearerGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// What clients put in `aud`: Google's current and former token URLs.
    public static let googleTokenAudiences: Set<String> = [
        "https://oauth2.googleapis.com/token", "https://accounts.google.com/o/oauth2/token",
        "https://www.googleapis.com/oauth2/v4/token",
    ]
    /// Either scope lets a token send messages.
    public static let messagingScopes: Set<String> = [
        "https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/cloud-platform",
    ]
    /// Google refuses assertions that live longer than an hour.
    static let maximumAssertionLifetime: Double = 3600
    /// Clock skew tolerated between the client and the emulator (strict mode only).
    static let allowedSkew: Double = 300
    static let maximumAssertionLength = 16 * 1024

    /// An OAuth2 error answer: HTTP 400 `{"error":error,"error_description":description}`.
    public struct Failure: Error, Sendable, Equatable {
        public var error: String
        public var description: String
        /// Strict mode's refusal of a signature: the assertion's `kid` ("" when it had none), for
        /// the log line the server writes at the default level. nil for every other failure.
        public var refusedKeyID: String?

        public init(_ error: String, _ description: String, refusedKeyID: String? = nil) {
            self.error = error
            self.description = description
            self.refusedKeyID = refusedKeyID
        }

        public var json: JSONValue {
            .object(["error": .string(error), "error_description": .string(description)])
        }
    }

    public struct Success: Sendable, Equatable {
        public var accessToken: String
        public var expiresIn: Int64

        public var json: JSONValue {
            .object(["access_token": .string(accessToken), "expires_in": .int(expiresIn), "token_type": "Bearer"])
        }
    }

    public let keys: ServiceAccountKeyStore
    public let issuer: AccessTokenIssuer
    public let verifiesSignatures: Bool

    public init(keys: ServiceAccountKeyStore, issuer: AccessTokenIssuer, verifiesSignatures: Bool) {
        self.keys = keys
        self.issuer = issuer
        self.verifiesSignatures = verifiesSignatures
    }

    /// Answers a token request (its form fields). `engineNowMillis` dates the access token (the
    /// engine's clock, virtual or not); `wallNowSeconds` checks the assertion's `iat`/`exp`, which the
    /// client wrote from its own wall clock.
    public func exchange(form: [String: String], engineNowMillis: Int64, wallNowSeconds: Double) async -> Result<Success, Failure> {
        guard let grantType = form["grant_type"], !grantType.isEmpty else {
            return .failure(Failure("invalid_request", "Missing required parameter: grant_type"))
        }
        guard grantType == Self.jwtBearerGrantType else {
            return .failure(Failure("unsupported_grant_type", "Invalid grant_type: \(grantType.prefix(200))"))
        }
        guard let assertion = form["assertion"], !assertion.isEmpty else {
            return .failure(Failure("invalid_request", "Missing required parameter: assertion"))
        }
        switch await grant(assertion: assertion, engineNowMillis: engineNowMillis, wallNowSeconds: wallNowSeconds) {
        case .success(let grant):
            return .success(Success(accessToken: issuer.issue(grant), expiresIn: AccessTokenIssuer.lifetimeSeconds))
        case .failure(let failure):
            return .failure(failure)
        }
    }

    func grant(assertion: String, engineNowMillis: Int64, wallNowSeconds: Double) async -> Result<AccessGrant, Failure> {
        let malformed = Failure("invalid_grant", "Invalid JWT: the assertion must be three base64url parts (header.claims.signature)")
        guard assertion.utf8.count <= Self.maximumAssertionLength else { return .failure(malformed) }
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let header = Base64URL.decode(parts[0]).flatMap({ try? JSONValue.parse(String(decoding: $0, as: UTF8.self)) }),
              let claims = Base64URL.decode(parts[1]).flatMap({ try? JSONValue.parse(String(decoding: $0, as: UTF8.self)) }),
              case .object = header, case .object = claims
        else { return .failure(malformed) }
        guard header["alg"]?.stringValue == "RS256" else {
            return .failure(Failure("invalid_grant", "Invalid JWT: the header's alg must be RS256"))
        }
        guard let iss = claims["iss"]?.stringValue, !iss.isEmpty else {
            return .failure(Failure("invalid_grant", "Invalid JWT: the iss claim (the service account's e-mail) is missing"))
        }
        let audiences: [String]
        switch claims["aud"] {
        case .string(let aud)?: audiences = [aud]
        case .array(let list)?: audiences = list.compactMap(\.stringValue)
        default: audiences = []
        }
        guard audiences.contains(where: Self.isTokenAudience) else {
            return .failure(Failure("invalid_grant",
                "Invalid JWT: Failed audience check. The right audience is https://oauth2.googleapis.com/token"))
        }
        guard let iat = claims["iat"]?.numberValue, let exp = claims["exp"]?.numberValue else {
            return .failure(Failure("invalid_grant", "Invalid JWT: the iat and exp claims must be numbers (seconds)"))
        }
        let scopes = Set((claims["scope"]?.stringValue ?? "").split(separator: " ").map(String.init))
        guard !scopes.isEmpty else {
            return .failure(Failure("invalid_scope", "Invalid OAuth scope or ID token audience provided."))
        }

        var projectID = Self.projectID(ofServiceAccount: iss)
        let kid = header["kid"]?.stringValue
        if verifiesSignatures {
            guard let kid, let key = keys.key(id: kid) else {
                return .failure(signatureRefused(kid: kid, key: nil))
            }
            guard await Self.signatureHolds(assertion, key: key) else {
                return .failure(signatureRefused(kid: kid, key: key))
            }
            guard key.clientEmail == iss else {
                return .failure(Failure("invalid_grant", "Invalid grant: account not found"))
            }
            guard exp > iat, exp - iat <= Self.maximumAssertionLifetime + 1,
                  iat <= wallNowSeconds + Self.allowedSkew, exp >= wallNowSeconds - Self.allowedSkew else {
                return .failure(Failure("invalid_grant",
                    "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."))
            }
            projectID = key.projectID
        } else if let kid, let key = keys.key(id: kid), key.clientEmail == iss {
            projectID = key.projectID
        }
        // Far past or far future numbers from a client must not overflow the expiry.
        let expires = engineNowMillis.addingReportingOverflow(AccessTokenIssuer.lifetimeSeconds * 1000)
        return .success(AccessGrant(projectID: projectID, clientEmail: iss,
                                    mayMessage: !scopes.isDisjoint(with: Self.messagingScopes),
                                    expiresAtMillis: expires.overflow ? Int64.max : expires.partialValue))
    }

    /// Google's answer to a signature it cannot check (`invalid_grant`, "Invalid JWT Signature."),
    /// with a hint after it: why (the `kid` is missing, unknown, or its key does not verify the
    /// signature), which keys this emulator knows, and how to get a file for one. The usual cause is
    /// a service-account file from Google (or from another emulator's data dir) under `--auth strict`.
    func signatureRefused(kid: String?, key: IssuedKey?) -> Failure {
        let why: String
        switch (kid, key) {
        case (nil, _):
            why = "the assertion's header has no kid (the service-account file's private_key_id)"
        case (let kid?, nil):
            why = "its kid \(JSONValue.string(String(kid.prefix(80))).encoded()) is not a key this emulator issued"
        case (let kid?, let key?):
            why = "its kid \"\(kid)\" (project \(key.projectID)) is this emulator's, but the signature does not hold with "
                + "that key's public half: the file's private_key is not the one issued with it"
        }
        let known = keys.all()
        let listed = known.prefix(5).map { "\($0.keyID) (project \($0.projectID))" }.joined(separator: ", ")
        let knows = known.isEmpty ? "it knows no keys yet"
            : "it knows \(known.count) key\(known.count == 1 ? "" : "s"): \(listed)\(known.count > 5 ? ", …" : "")"
        return Failure("invalid_grant",
            "Invalid JWT Signature. (ccs-emulator, --auth strict: \(why); \(knows) in \(keys.directory). "
                + "Get a service-account file it knows: POST /emulator/v1/credentials {\"project_id\":\"P\"}, "
                + "or ccs-emulator credentials --project P --out FILE)",
            refusedKeyID: kid ?? "")
    }

    /// Google's token URLs, and any URL whose path is `/token` (clients such as Go's oauth2 put the
    /// file's `token_uri` in `aud`, which then points here).
    static func isTokenAudience(_ aud: String) -> Bool {
        if googleTokenAudiences.contains(aud) { return true }
        guard let url = URL(string: aud), let scheme = url.scheme, scheme == "http" || scheme == "https" else { return false }
        return url.path == "/token"
    }

    /// `NAME@PROJECT.iam.gserviceaccount.com` → `PROJECT`.
    public static func projectID(ofServiceAccount email: String) -> String? {
        let suffix = ".iam.gserviceaccount.com"
        guard email.hasSuffix(suffix), let at = email.lastIndex(of: "@") else { return nil }
        let project = String(email[email.index(after: at)..<email.index(email.endIndex, offsetBy: -suffix.count)])
        return ProjectID.isValid(project) ? project : nil
    }

    /// jwt-kit checks the RS256 signature (PKCS#1 v1.5, SHA-256) with the issued public key.
    static func signatureHolds(_ assertion: String, key: IssuedKey) async -> Bool {
        do {
            let publicKey = try Insecure.RSA.PublicKey(pem: key.publicKeyPEM)
            let collection = JWTKeyCollection()
            await collection.add(rsa: publicKey, digestAlgorithm: .sha256, kid: JWKIdentifier(string: key.keyID))
            _ = try await collection.verify(assertion, as: AnyClaims.self)
            return true
        } catch {
            return false
        }
    }
}

/// Claims are checked by `TokenExchange` itself (with Google's error texts); jwt-kit only checks
/// the signature, so its payload type takes any object.
struct AnyClaims: JWTPayload {
    init(from decoder: any Decoder) throws {}
    func encode(to encoder: any Encoder) throws {}
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// `application/x-www-form-urlencoded` bodies (token requests, the legacy plain-text API).
public enum FormBody {
    /// Decodes `a=b&c=d`: `+` is a space, `%XX` a byte; nil when an escape is broken or the text is
    /// not UTF-8. A repeated name keeps its first value; `&&` and names without `=` are skipped.
    public static func decode(_ body: String) -> [(name: String, value: String)]? {
        var fields: [(name: String, value: String)] = []
        for pair in body.split(separator: "&", omittingEmptySubsequences: true) {
            let pieces = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = unescape(pieces[0]) else { return nil }
            let value: String
            if pieces.count == 2 {
                guard let v = unescape(pieces[1]) else { return nil }
                value = v
            } else {
                value = ""
            }
            if name.isEmpty { continue }
            fields.append((name, value))
        }
        return fields
    }

    /// The fields as a dictionary (first value of each name wins).
    public static func dictionary(_ body: String) -> [String: String]? {
        guard let fields = decode(body) else { return nil }
        var result: [String: String] = [:]
        for (name, value) in fields where result[name] == nil { result[name] = value }
        return result
    }

    static func unescape(_ s: Substring) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(s.utf8.count)
        var iterator = s.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
                bytes.append(high << 4 | low)
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
