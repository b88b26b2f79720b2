import Crypto
import Foundation
import Testing
@testable import APNsProviderAPI

/// Builds provider tokens as a provider library does (ES256 over base64url header.claims).
struct TokenMaker {
    let privateKey = P256.Signing.PrivateKey()
    let key: ProviderKey

    init(keyID: String = "KEY0000001", teamID: String = "TEAM000001", topics: [String] = [],
         environment: KeyEnvironment = .both) {
        key = ProviderKey(keyID: keyID, teamID: teamID, topics: topics, environment: environment,
                          publicKey: privateKey.publicKey)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    func token(iat: Int64, alg: String = "ES256", kid: String? = nil, iss: String? = nil,
               signer: P256.Signing.PrivateKey? = nil) -> String {
        let header = Self.base64URL(Data(#"{"alg":"\#(alg)","kid":"\#(kid ?? key.keyID)"}"#.utf8))
        let claims = Self.base64URL(Data(#"{"iss":"\#(iss ?? key.teamID)","iat":\#(iat)}"#.utf8))
        let signature = try! (signer ?? privateKey).signature(for: Data((header + "." + claims).utf8))
        return header + "." + claims + "." + Self.base64URL(signature.rawRepresentation)
    }

    func lookup(_ id: String) -> ProviderKey? { id == key.keyID ? key : nil }
}

@Suite struct ProviderTokenTests {
    let maker = TokenMaker()
    let now: Int64 = 1_800_000_000

    func verify(_ token: String) -> Result<ProviderToken, ProviderReason> {
        ProviderToken.verify(bearer: Substring(token), keys: maker.lookup, nowSeconds: now)
    }

    @Test func aGoodTokenVerifies() throws {
        let token = try verify(maker.token(iat: now - 10)).get()
        #expect(token.teamID == "TEAM000001" && token.issuedAt == now - 10)
    }

    @Test func refusals() {
        #expect(verify(maker.token(iat: now, kid: "KEY0000009")) == .failure(.invalidProviderToken))
        #expect(verify(maker.token(iat: now, iss: "TEAM000009")) == .failure(.invalidProviderToken))
        #expect(verify(maker.token(iat: now, alg: "ES384")) == .failure(.invalidProviderToken))
        #expect(verify(maker.token(iat: now, signer: P256.Signing.PrivateKey())) == .failure(.invalidProviderToken))
        #expect(verify(maker.token(iat: now + 60)) == .failure(.invalidProviderToken))
        #expect(verify(maker.token(iat: now - 3601)) == .failure(.expiredProviderToken))
        #expect(verify(maker.token(iat: now - 3600)).map(\.issuedAt) == .success(now - 3600))
        for garbage in ["", "a.b", "a.b.c", "....", String(repeating: "x", count: 20_000)] {
            #expect(verify(garbage) == .failure(.invalidProviderToken))
        }
    }

    @Test func aTamperedClaimFailsTheSignature() {
        let parts = maker.token(iat: now).split(separator: ".")
        let claims = TokenMaker.base64URL(Data(#"{"iss":"TEAM000001","iat":\#(now - 1)}"#.utf8))
        #expect(verify(parts[0] + "." + claims + "." + parts[2]) == .failure(.invalidProviderToken))
    }
}
