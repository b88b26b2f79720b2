import Crypto
import Foundation
import GoogleAuth
import PushDomain
import Testing

@Suite struct GoogleAuthTests {
    static func temporaryDirectory() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("google-auth-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    @Test func accessTokensRoundTripExpireAndResistTampering() throws {
        let issuer = AccessTokenIssuer(key: SymmetricKey(size: .bits256))
        let grant = AccessGrant(projectID: "demo", clientEmail: "a@demo.iam.gserviceaccount.com", mayMessage: true, expiresAtMillis: 5000)
        let token = issuer.issue(grant)
        #expect(issuer.check(token, nowMillis: 4999) == .success(grant))
        #expect(issuer.check(token, nowMillis: 5000) == .failure(.expired))
        // Another secret (another emulator) did not issue it.
        #expect(AccessTokenIssuer(key: SymmetricKey(size: .bits256)).check(token, nowMillis: 0) == .failure(.invalid))
        // Any change to the grant breaks the signature.
        var tampered = Array(token)
        tampered[8] = tampered[8] == "A" ? "B" : "A"
        #expect(issuer.check(String(tampered), nowMillis: 0) == .failure(.invalid))
        for garbage in ["", "ya29.", "ya29..", "ya29.%%%.%%%", String(repeating: "ya29.", count: 1000)] {
            #expect(issuer.check(garbage, nowMillis: 0) == .failure(.invalid))
        }
    }

    @Test func theTokenSecretSurvivesARestart() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let grant = AccessGrant(projectID: nil, clientEmail: "x", mayMessage: false, expiresAtMillis: .max)
        let token = try AccessTokenIssuer(secretIn: dir).issue(grant)
        #expect(try AccessTokenIssuer(secretIn: dir).check(token, nowMillis: 0) == .success(grant))
        let attributes = try FileManager.default.attributesOfItem(atPath: dir + "/access-token.key")
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
    }

    @Test func issuedKeysAreStoredWithoutTheirPrivateHalf() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try ServiceAccountKeyStore(directory: dir)
        let file = try store.issue(projectID: "demo-project", tokenURI: "http://127.0.0.1:1/token", nowMillis: 7)
        let id = try #require(file["private_key_id"]?.stringValue)
        #expect(id.count == 40)
        #expect(file["client_email"]?.stringValue?.hasSuffix("@demo-project.iam.gserviceaccount.com") == true)
        let stored = try String(contentsOfFile: dir + "/\(id).json", encoding: .utf8)
        #expect(!stored.contains("PRIVATE KEY"))
        #expect(stored.contains("BEGIN PUBLIC KEY"))
        // A second store on the same directory (a restart, or the CLI beside a server) finds it.
        #expect(try ServiceAccountKeyStore(directory: dir).key(id: id)?.projectID == "demo-project")
        let late = try ServiceAccountKeyStore(directory: dir)
        let other = try store.issue(projectID: "123", tokenURI: "http://x/token", nowMillis: 8)
        #expect(late.key(id: try #require(other["private_key_id"]?.stringValue)) != nil)
        #expect(late.key(id: "../../etc/passwd") == nil)
        #expect(throws: CredentialsError.self) { try store.issue(projectID: "Not Valid", tokenURI: "x", nowMillis: 0) }
        let text = ServiceAccountKeyStore.serviceAccountText(file)
        #expect(try JSONValue.parse(text) == file)
        #expect(text.hasPrefix("{\n  \"type\": \"service_account\",\n  \"project_id\""))
    }

    @Test func formBodiesDecodeLikeBrowsersEncode() throws {
        #expect(FormBody.dictionary("a=1&b=x+y&c=%C3%A9&d&=e&a=2") == ["a": "1", "b": "x y", "c": "é", "d": ""])
        #expect(FormBody.dictionary("a=%zz") == nil)
        #expect(FormBody.dictionary("a=%") == nil)
        #expect(FormBody.dictionary("a=%FF") == nil)
        #expect(FormBody.dictionary("") == [:])
    }

    @Test func projectIDs() {
        #expect(ProjectID.isValid("demo-project"))
        #expect(ProjectID.isValid("123456789012"))
        #expect(!ProjectID.isValid("Demo"))
        #expect(!ProjectID.isValid("a/b"))
        #expect(!ProjectID.isValid(String(repeating: "a", count: 64)))
        #expect(TokenExchange.projectID(ofServiceAccount: "x@demo-1.iam.gserviceaccount.com") == "demo-1")
        #expect(TokenExchange.projectID(ofServiceAccount: "x@gmail.com") == nil)
    }
}
