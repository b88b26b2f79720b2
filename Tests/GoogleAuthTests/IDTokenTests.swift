import Crypto
import Foundation
import GoogleAuth
import Testing

@Suite struct IDTokenTests {
    @Test func theKeySurvivesARestartInAPrivateFile() throws {
        let dir = try GoogleAuthTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = try IDTokenIssuer(keyIn: dir)
        let token = first.issue(email: "chris@example.com", audience: "web", nowSeconds: 100)
        let again = try IDTokenIssuer(keyIn: dir)
        #expect(again.keyID == first.keyID)
        #expect(again.verify(token, nowSeconds: 101).map(\.email) == .success("chris@example.com"))
        let attributes = try FileManager.default.attributesOfItem(atPath: dir + "/id-token-key.pem")
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
    }

    @Test func onlyAnUntamperedES256TokenOfThisKeyIsAccepted() throws {
        let issuer = IDTokenIssuer()
        let token = issuer.issue(email: "a@b.c", audience: "web", nowSeconds: 0)
        let parts = token.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        // Another claim set under the same signature.
        let otherClaims = IDTokenIssuer().issue(email: "evil@b.c", audience: "web", nowSeconds: 0).split(separator: ".")[1]
        // The same claims with "alg":"none" and no signature.
        let none = Data(#"{"alg":"none","typ":"JWT"}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        for bad in ["", "a.b.c", "\(parts[0]).\(otherClaims).\(parts[2])", "\(none).\(parts[1]).", "\(parts[0]).\(parts[1])",
                    token + "A", String(repeating: "x", count: 5000)] {
            #expect(issuer.verify(bad, nowSeconds: 0) == .failure(.invalid), "\(bad.prefix(40))")
        }
        #expect(issuer.verify(token, nowSeconds: 3599).map(\.expiresAt) == .success(3600))
        #expect(issuer.verify(token, nowSeconds: 3600) == .failure(.expired))
    }
}
