import Crypto
import Foundation
import PushDomain

/// What an access token stands for.
public struct AccessGrant: Sendable, Equatable {
    /// The project of the service account the token was issued to; nil when permissive mode took an
    /// assertion from a key it did not issue and whose `iss` names no project.
    public var projectID: String?
    public var clientEmail: String
    /// The token carries the `firebase.messaging` or `cloud-platform` scope.
    public var mayMessage: Bool
    /// Engine-clock milliseconds.
    public var expiresAtMillis: Int64

    public init(projectID: String?, clientEmail: String, mayMessage: Bool, expiresAtMillis: Int64) {
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.mayMessage = mayMessage
        self.expiresAtMillis = expiresAtMillis
    }
}

public enum AccessTokenError: Error, Sendable, Equatable {
    /// Not a token this emulator could have issued, or its signature does not match.
    case invalid
    case expired
}

/// Issues and checks OAuth2 access tokens. A token is `ya29.` (Google's prefix), the grant as
/// base64url JSON, `.`, and an HMAC-SHA256 of it under a secret kept in
/// `DATA_DIR/credentials/access-token.key`: tokens need no table, survive restarts, and cannot be
/// forged by a client. They expire on the engine's clock (virtual clock included).
public struct AccessTokenIssuer: Sendable {
    /// Google's access tokens live an hour; it answers `expires_in: 3599`.
    public static let lifetimeSeconds: Int64 = 3599
    static let prefix = "ya29."
    /// Longer than any token this issuer makes: nothing longer is decoded.
    static let maximumLength = 2048

    private let key: SymmetricKey

    public init(key: SymmetricKey) {
        self.key = key
    }

    /// The issuer whose secret is in `directory/access-token.key` (created, mode 0600, when missing).
    public init(secretIn directory: String) throws(CredentialsError) {
        let path = directory + "/access-token.key"
        let fm = FileManager.default
        if let data = fm.contents(atPath: path), data.count == 32 {
            self.init(key: SymmetricKey(data: data))
            return
        }
        let secret = SymmetricKey(size: .bits256)
        let bytes = secret.withUnsafeBytes { Data($0) }
        let temporary = path + ".\(getpid()).tmp"
        unlink(temporary)
        try PrivateFile.create(atPath: temporary, contents: bytes)
        // link(2) fails if another process made the secret first: then that one is used.
        if link(temporary, path) != 0 {
            unlink(temporary)
            guard let data = fm.contents(atPath: path), data.count == 32 else {
                throw CredentialsError("cannot create \(path) (errno \(errno))")
            }
            self.init(key: SymmetricKey(data: data))
            return
        }
        unlink(temporary)
        self.init(key: secret)
    }

    public func issue(_ grant: AccessGrant) -> String {
        var payload: [String: JSONValue] = [
            "e": .string(grant.clientEmail), "m": .bool(grant.mayMessage), "x": .int(grant.expiresAtMillis),
        ]
        if let project = grant.projectID { payload["p"] = .string(project) }
        let body = Base64URL.encode(Data(JSONValue.object(payload).encoded().utf8))
        let mac = HMAC<SHA256>.authenticationCode(for: Data(body.utf8), using: key)
        return Self.prefix + body + "." + Base64URL.encode(Data(mac))
    }

    /// The grant behind `token`, if this issuer made it and it has not expired at `nowMillis`.
    public func check(_ token: String, nowMillis: Int64) -> Result<AccessGrant, AccessTokenError> {
        guard token.utf8.count <= Self.maximumLength, token.hasPrefix(Self.prefix) else { return .failure(.invalid) }
        let rest = token.dropFirst(Self.prefix.count)
        guard let dot = rest.lastIndex(of: ".") else { return .failure(.invalid) }
        let body = rest[..<dot]
        guard let mac = Base64URL.decode(rest[rest.index(after: dot)...]),
              HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: Data(body.utf8), using: key),
              let json = Base64URL.decode(body).flatMap({ try? JSONValue.parse(String(decoding: $0, as: UTF8.self)) }),
              let email = json["e"]?.stringValue, let expires = json["x"]?.intValue, let mayMessage = json["m"]?.boolValue
        else { return .failure(.invalid) }
        if nowMillis >= expires { return .failure(.expired) }
        return .success(AccessGrant(projectID: json["p"]?.stringValue, clientEmail: email, mayMessage: mayMessage,
                                    expiresAtMillis: expires))
    }
}

/// Base64url without padding (RFC 7515 §2), as JWTs and the tokens use it.
enum Base64URL {
    static func encode(_ data: Data) -> String {
        var s = data.base64EncodedString()
        s = s.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while s.hasSuffix("=") { s.removeLast() }
        return s
    }

    /// Decoded byte by byte: every v1 request decodes its token's two parts, and Foundation's
    /// string replacing (through NSString on Linux) was a fifth of a v1 send's CPU time.
    static func decode(_ s: some StringProtocol) -> Data? {
        var out = [UInt8]()
        out.reserveCapacity(s.utf8.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in s.utf8 {
            let value: UInt32
            switch byte {
            case 0x41...0x5A: value = UInt32(byte - 0x41)
            case 0x61...0x7A: value = UInt32(byte - 0x61 + 26)
            case 0x30...0x39: value = UInt32(byte - 0x30 + 52)
            case 0x2D: value = 62
            case 0x5F: value = 63
            default: return nil
            }
            accumulator = accumulator << 6 | value
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // A lone 6-bit group cannot end a base64 text (RFC 4648 §4), and left-over bits must be zero.
        if bits >= 6 || accumulator != 0 { return nil }
        return Data(out)
    }
}
