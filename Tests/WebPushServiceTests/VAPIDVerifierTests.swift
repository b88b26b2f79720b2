import Crypto
import Foundation
import PushDomain
import Testing
@testable import WebPushService

@Suite struct VAPIDVerifierTests {
    let f = PushFixtures()

    func verify(_ authorization: String?, cryptoKey: String? = nil) -> Result<VAPIDVerifier.Identity, VAPIDVerifier.Refusal> {
        VAPIDVerifier.verify(authorization: authorization, cryptoKey: cryptoKey, audience: "https://fcm.googleapis.com",
                             nowSeconds: PushFixtures.now)
    }

    @Test func rfc8292sFormVerifies() throws {
        let identity = try verify(try f.vapid()).get()
        #expect(identity.subject == "mailto:a@example.com")
    }

    @Test func theEmulatorsOwnSenderIsAccepted() throws {
        let header = try f.server.authorization(endpoint: "https://fcm.googleapis.com/fcm/send/x", nowMillis: PushFixtures.now * 1000)
        #expect(throws: Never.self) { try verify(header).get() }
    }

    @Test func eachClaimIsChecked() throws {
        #expect(verify(nil).failure == .missing("the request has no Authorization header: send VAPID (RFC 8292), Authorization: vapid t=<JWT>, k=<key>"))
        #expect(verify(try f.vapid(aud: "https://other.example")).failure?.reason.contains("aud") == true)
        #expect(verify(try f.vapid(exp: PushFixtures.now - 1)).failure?.reason.contains("expired") == true)
        #expect(verify(try f.vapid(exp: PushFixtures.now + 24 * 3600 + 1)).failure?.reason.contains("24 hours") == true)
        #expect(throws: Never.self) { try verify(try f.vapid(exp: PushFixtures.now + 24 * 3600)).get() }
        #expect(verify(try f.vapid(sub: nil)).failure?.reason.contains("sub") == true)
        #expect(verify(try f.vapid(sub: "someone@example.com")).failure?.reason.contains("mailto:") == true)
    }

    @Test func aSignatureByAnotherKeyIsRefused() throws {
        let token = try PushFixtures.jwt(.object(["aud": "https://fcm.googleapis.com", "exp": .int(PushFixtures.now + 60),
                                                  "sub": "mailto:x@y"]), key: P256.Signing.PrivateKey())
        #expect(verify("vapid t=\(token), k=\(f.server.publicKeyBase64URL)").failure?.reason.contains("signature") == true)
        let hs = try PushFixtures.jwt(.object(["aud": "https://fcm.googleapis.com"]), key: f.server.privateKey, alg: "HS256")
        #expect(verify("vapid t=\(hs), k=\(f.server.publicKeyBase64URL)").failure?.reason.contains("ES256") == true)
    }

    @Test func malformedHeadersAreRefusedNotCrashed() {
        for header in ["vapid", "vapid t=", "vapid t=a.b.c, k=", "Bearer x", "key=AAAA", "WebPush a.b.c", "vapid t=..., k=AAAA",
                       "vapid t=\u{0}, k=\u{0}", String(repeating: "vapid ", count: 1000)] {
            #expect(verify(header, cryptoKey: "p256ecdsa=").failure != nil, "\(header.prefix(40))")
        }
    }

    @Test func aCachedTokenSkipsTheSignatureButNotTheClaims() throws {
        let cache = VAPIDTokenCache()
        let header = try f.vapid(exp: PushFixtures.now + 600)
        func check(_ now: Int64, audience: String = "https://fcm.googleapis.com") -> Result<VAPIDVerifier.Identity, VAPIDVerifier.Refusal> {
            VAPIDVerifier.verify(authorization: header, cryptoKey: nil, audience: audience, nowSeconds: now, cache: cache)
        }
        #expect(try check(PushFixtures.now).get().subject == "mailto:a@example.com")
        #expect(try check(PushFixtures.now + 1).get().publicKey == Array(f.server.privateKey.publicKey.x963Representation))
        #expect(check(PushFixtures.now + 601).failure?.reason.contains("expired") == true)
        #expect(check(PushFixtures.now, audience: "http://127.0.0.1:1").failure?.reason.contains("aud") == true)
        // The same token with another key is another entry: it must verify, and does not.
        let other = header.replacingOccurrences(of: f.server.publicKeyBase64URL, with: VAPIDFixture.otherKey)
        #expect(VAPIDVerifier.verify(authorization: other, cryptoKey: nil, audience: "https://fcm.googleapis.com",
                                     nowSeconds: PushFixtures.now, cache: cache).failure?.reason.contains("signature") == true)
    }
}
