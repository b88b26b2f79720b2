import Crypto
import Foundation
import PushDomain

/// Voluntary Application Server Identification (RFC 8292): the emulator, as FCM does, signs a JWT
/// for each push service it sends to, so that the service can check who sends. One P-256 key per
/// data directory (`DATA_DIR/tls/vapid-key.pem`), its public half in `GET /emulator/v1/info`.
public struct VAPIDKey: Sendable {
    public let privateKey: P256.Signing.PrivateKey

    public init(privateKey: P256.Signing.PrivateKey) { self.privateKey = privateKey }

    /// A fresh key (an application server's of its own: the load generator's, tests').
    public static func generate() -> VAPIDKey { VAPIDKey(privateKey: P256.Signing.PrivateKey()) }

    /// The key in `path`, made (0600) when there is none.
    public static func ensure(at path: String) throws -> VAPIDKey {
        if let pem = try? String(contentsOfFile: path, encoding: .utf8) {
            return VAPIDKey(privateKey: try P256.Signing.PrivateKey(pemRepresentation: pem))
        }
        let key = P256.Signing.PrivateKey()
        // Kept, or every start would sign with a key no push service has seen.
        guard FileManager.default.createFile(atPath: path, contents: Data(key.pemRepresentation.utf8),
                                             attributes: [.posixPermissions: 0o600]) else {
            throw WebPushEncryption.Failure(description: "cannot write the VAPID key to \(path)")
        }
        return VAPIDKey(privateKey: key)
    }

    /// The public key as a browser's `applicationServerKey` takes it: base64url of the 65-byte point.
    public var publicKeyBase64URL: String { Base64URL.encode(privateKey.publicKey.x963Representation) }

    /// `vapid t=JWT, k=KEY` for a request to `endpoint`: the JWT's `aud` is the endpoint's origin,
    /// `exp` 12 hours from `nowMillis` (RFC 8292 allows at most 24), `sub` a contact.
    public func authorization(endpoint: String, nowMillis: Int64) throws -> String {
        guard let url = URL(string: endpoint), let scheme = url.scheme, let host = url.host else {
            throw WebPushEncryption.Failure(description: "the endpoint \(endpoint) is not a URL")
        }
        let origin = "\(scheme)://\(host)" + (url.port.map { ":\($0)" } ?? "")
        let header = Base64URL.encode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8))
        let claims = JSONValue.object(["aud": .string(origin), "exp": .int(nowMillis / 1000 + 12 * 3600),
                                       "sub": .string("mailto:ccs-emulator@localhost")]).encoded()
        let signingInput = header + "." + Base64URL.encode(Array(claims.utf8))
        // JWS ES256: the signature is r || s, 64 bytes (RFC 7518 §3.4), not DER.
        let signature = try privateKey.signature(for: Data(signingInput.utf8)).rawRepresentation
        return "vapid t=\(signingInput).\(Base64URL.encode(signature)), k=\(publicKeyBase64URL)"
    }
}
