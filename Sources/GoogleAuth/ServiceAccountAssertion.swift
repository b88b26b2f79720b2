import Foundation
import JWTKit
import PushDomain

/// The client side of the JWT-bearer grant, as google-auth does it: what `ccs-emulator send --api v1`
/// and `bench http-v1` use to get an access token from a service-account file.
public enum ServiceAccountAssertion {
    public static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"
    /// google-auth puts Google's token URL in `aud` whatever `token_uri` says.
    public static let googleTokenURL = "https://oauth2.googleapis.com/token"

    struct Claims: JWTPayload {
        var iss: String
        var aud: String
        var scope: String
        var iat: Int
        var exp: Int
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// The fields of a service-account file the grant needs.
    public struct Account: Sendable {
        public var projectID: String
        public var clientEmail: String
        public var privateKeyID: String
        public var privateKeyPEM: String
        public var tokenURI: String

        public init(file: JSONValue) throws(CredentialsError) {
            guard case .object(let fields) = file else { throw CredentialsError("a service-account file is a JSON object") }
            func field(_ name: String) throws(CredentialsError) -> String {
                guard case .string(let value)? = fields[name], !value.isEmpty else {
                    throw CredentialsError("the service-account file has no \"\(name)\" string")
                }
                return value
            }
            projectID = try field("project_id")
            clientEmail = try field("client_email")
            privateKeyID = try field("private_key_id")
            privateKeyPEM = try field("private_key")
            tokenURI = try field("token_uri")
        }
    }

    /// An RS256 JWT with `kid`, `iss` the account, `aud` Google's token URL, valid one hour.
    public static func sign(_ account: Account, scope: String = messagingScope, nowSeconds: Int) async throws(CredentialsError) -> String {
        do {
            let keys = JWTKeyCollection()
            let kid = JWKIdentifier(string: account.privateKeyID)
            await keys.add(rsa: try Insecure.RSA.PrivateKey(pem: account.privateKeyPEM), digestAlgorithm: .sha256, kid: kid)
            var header = JWTHeader()
            header.typ = "JWT"
            let claims = Claims(iss: account.clientEmail, aud: googleTokenURL, scope: scope, iat: nowSeconds, exp: nowSeconds + 3600)
            return try await keys.sign(claims, kid: kid, header: header)
        } catch {
            throw CredentialsError("cannot sign with the service account's private key: \(error)")
        }
    }

    /// The token request body for `assertion`.
    public static func form(_ assertion: String) -> String {
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
    }
}
