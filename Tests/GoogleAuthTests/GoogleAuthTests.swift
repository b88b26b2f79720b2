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

    /// Under --auth strict a key this emulator did not issue (Google's own file, another data dir's)
    /// gets Google's answer, with a hint after it: the key id, the keys it knows, how to get one.
    @Test func aForeignKeyIsRefusedWithAHint() async throws {
        let dir = try Self.temporaryDirectory(), elsewhere = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir); try? FileManager.default.removeItem(atPath: elsewhere) }
        let store = try ServiceAccountKeyStore(directory: dir)
        let exchange = TokenExchange(keys: store, issuer: AccessTokenIssuer(key: SymmetricKey(size: .bits256)), verifiesSignatures: true)
        let ours = try store.issue(projectID: "demo-project", tokenURI: "http://127.0.0.1:1/token", nowMillis: 1)
        let foreign = try ServiceAccountKeyStore(directory: elsewhere).issue(projectID: "demo-project", tokenURI: "http://x/token", nowMillis: 2)
        let ourID = try #require(ours["private_key_id"]?.stringValue), foreignID = try #require(foreign["private_key_id"]?.stringValue)
        let now = Int(Date().timeIntervalSince1970)

        func answer(_ file: JSONValue) async throws -> Result<TokenExchange.Success, TokenExchange.Failure> {
            let assertion = try await ServiceAccountAssertion.sign(try ServiceAccountAssertion.Account(file: file), nowSeconds: now)
            return await exchange.exchange(form: ["grant_type": TokenExchange.jwtBearerGrantType, "assertion": assertion],
                                           engineNowMillis: 0, wallNowSeconds: Double(now))
        }
        guard case .success = try await answer(ours) else { Issue.record("our own key was refused"); return }

        guard case .failure(let refused) = try await answer(foreign) else { Issue.record("a foreign key was taken"); return }
        #expect(refused.error == "invalid_grant")
        #expect(refused.description.hasPrefix("Invalid JWT Signature. (ccs-emulator"))
        #expect(refused.refusedKeyID == foreignID)
        for hint in ["\"\(foreignID)\" is not a key this emulator issued", "it knows 1 key: \(ourID) (project demo-project)",
                     "POST /emulator/v1/credentials", "ccs-emulator credentials --project P"] {
            #expect(refused.description.contains(hint), "\(hint) not in \(refused.description)")
        }
        #expect(refused.json["error_description"]?.stringValue == refused.description)

        // The emulator's key id with another private key: the signature does not hold.
        guard case .object(var fields) = ours else { Issue.record("not an object"); return }
        fields["private_key"] = foreign["private_key"]
        guard case .failure(let bad) = try await answer(.object(fields)) else { Issue.record("a forged key was taken"); return }
        #expect(bad.refusedKeyID == ourID)
        #expect(bad.description.hasPrefix("Invalid JWT Signature. (ccs-emulator"))
        #expect(bad.description.contains("the signature does not hold"), "\(bad.description)")

        // Other refusals carry no key id (nothing to log as a signature refusal).
        let malformed = await exchange.exchange(form: ["grant_type": TokenExchange.jwtBearerGrantType, "assertion": "x.y.z"],
                                                engineNowMillis: 0, wallNowSeconds: Double(now))
        guard case .failure(let other) = malformed else { Issue.record("garbage was taken"); return }
        #expect(other.refusedKeyID == nil)
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
