import CCSEngine
import CCSProtocol
import PushDomain
import StoreModel
import FCMHTTP
import Foundation
import GoogleAuth
import Hummingbird
import HummingbirdTesting
import JWTKit
import Testing

/// An engine on a temporary store and a virtual clock, with the FCM HTTP routes in front of it.
final class Fixture: Sendable {
    let engine: Engine
    let api: FCMHTTPAPI
    let clock = VirtualClock(startMillis: 1_700_000_000_000)
    let directory: URL

    init(authMode: AuthMode = .permissive, senders: [String: String] = [:], projects: [String: String] = [:]) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fcm-http-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let store = InMemoryStore()
        engine = try Engine(committer: GroupCommitter(store: store), clock: clock,
                            configuration: .init(authMode: authMode, configuredSenders: senders))
        api = try FCMHTTPAPI(engine: engine, credentialsDirectory: directory.appendingPathComponent("credentials").path,
                             projectSenders: projects)
    }

    deinit {
        engine.committer.shutdownBlocking()
        try? FileManager.default.removeItem(at: directory)
    }

    func test(_ body: @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        let router = Router()
        api.addRoutes(to: router)
        try await Application(router: router).test(.router, body)
    }

    func register(app: String = "com.example.app", senders: [String] = ["123456789"]) async throws -> String {
        try await engine.registerDevice(app: app, senders: senders, platform: .android).token
    }

    func queue(_ token: String) throws -> [QueuedMessage] { try engine.queuedMessages(token: token) }

    /// A service-account file for `project` and an access token for it, obtained the way an SDK does.
    func accessToken(project: String = "123456789", client: any TestClientProtocol) async throws -> String {
        let file = try api.keys.issue(projectID: project, tokenURI: "http://localhost/token", nowMillis: 0)
        let assertion = try await Assertion.sign(file)
        let response = try await client.execute(uri: "/token", method: .post,
                                                headers: [.contentType: "application/x-www-form-urlencoded"],
                                                body: ByteBuffer(string: Assertion.form(assertion)))
        #expect(response.status == .ok, "\(String(buffer: response.body))")
        return try #require(try JSONValue.parse(String(buffer: response.body))["access_token"]?.stringValue)
    }
}

/// What google-auth builds: an RS256 JWT with `kid`, signed with the service account's private key.
enum Assertion {
    struct Claims: JWTPayload {
        var iss: String
        var aud: String
        var scope: String
        var iat: Int
        var exp: Int
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    static func sign(_ file: JSONValue, aud: String = "https://oauth2.googleapis.com/token",
                     scope: String = "https://www.googleapis.com/auth/firebase.messaging https://www.googleapis.com/auth/cloud-platform",
                     kid: String? = nil, privateKeyPEM: String? = nil) async throws -> String {
        let pem = try #require(privateKeyPEM ?? file["private_key"]?.stringValue)
        let keyID = try #require(kid ?? file["private_key_id"]?.stringValue)
        let keys = JWTKeyCollection()
        await keys.add(rsa: try Insecure.RSA.PrivateKey(pem: pem), digestAlgorithm: .sha256, kid: JWKIdentifier(string: keyID))
        let now = Int(Date().timeIntervalSince1970)
        let claims = Claims(iss: try #require(file["client_email"]?.stringValue), aud: aud, scope: scope, iat: now, exp: now + 3600)
        var header = JWTHeader()
        header.typ = "JWT"
        return try await keys.sign(claims, kid: JWKIdentifier(string: keyID), header: header)
    }

    static func form(_ assertion: String) -> String {
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
    }
}

func json(_ response: TestResponse) throws -> JSONValue { try JSONValue.parse(String(buffer: response.body)) }

func post(_ client: any TestClientProtocol, _ uri: String, _ body: String,
          headers: HTTPFields = [.contentType: "application/json"]) async throws -> TestResponse {
    try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: body))
}
