import Crypto
import Foundation
import PushDomain
import Testing
@testable import WebPushService

@Suite struct PushRequestValidatorTests {
    @Test func anAES128GCMMessageIsAcceptedAndDecrypted() throws {
        let f = PushFixtures()
        let accepted = try f.validate(try f.request("When I grow up")).get()
        #expect(String(decoding: accepted.plaintext, as: UTF8.self) == "When I grow up")
        #expect(accepted.encoding == .aes128gcm && accepted.ttl == 60 && accepted.urgency == .normal && !accepted.ttlCapped)
        #expect(accepted.applicationServer.publicKey == Array(f.server.privateKey.publicKey.x963Representation))
    }

    @Test func anAESGCMMessageIsAcceptedWithTheWebPushAuthorizationForm() throws {
        let f = PushFixtures()
        let (body, encryption, dh) = try f.aesgcm("older draft")
        let jwt = try PushFixtures.jwt(.object(["aud": "https://fcm.googleapis.com", "exp": .int(PushFixtures.now + 60),
                                                "sub": "https://app.example"]), key: f.server.privateKey)
        let request = PushRequest(ttl: "0", contentEncoding: "aesgcm", encryption: encryption,
                                  cryptoKey: "p256ecdsa=\(f.server.publicKeyBase64URL);\(dh)", authorization: "WebPush \(jwt)", body: body)
        let accepted = try f.validate(request).get()
        #expect(String(decoding: accepted.plaintext, as: UTF8.self) == "older draft")
        #expect(accepted.encoding == .aesgcm && accepted.ttl == 0)
        #expect(PushedMessage(data: .object(PushedMessage(accepted).data.mapValues { .string($0) }))?.cryptoKey?.contains("dh=") == true)
    }

    @Test func theSubscriptionIsCheckedFirst() throws {
        let f = PushFixtures()
        #expect(f.validate(try f.request(), .unknown).failure?.status == .notFound)
        #expect(f.validate(try f.request(), .gone).failure?.status == .gone)
    }

    @Test func theTTLHeaderIsRequiredAndCapped() throws {
        let f = PushFixtures()
        #expect(f.validate(try f.request(ttl: nil)).failure == PushRefusal(.badRequest, "the TTL header is required (RFC 8030 §5.2)"))
        #expect(f.validate(try f.request(ttl: "-1")).failure?.status == .badRequest)
        #expect(f.validate(try f.request(ttl: "1e3")).failure?.status == .badRequest)
        let capped = try f.validate(try f.request(ttl: "99999999999999999999")).get()
        #expect(capped.ttl == Message.maximumTimeToLive && capped.ttlCapped)
    }

    @Test func urgencyAndTopicAreRFC8030s() throws {
        let f = PushFixtures()
        var r = try f.request()
        r.urgency = "HIGH"
        r.topic = "score-update_1"
        let accepted = try f.validate(r).get()
        #expect(accepted.urgency == .high && accepted.topic == "score-update_1")
        r.urgency = "urgent"
        #expect(f.validate(r).failure?.status == .badRequest)
        r.urgency = nil
        r.topic = String(repeating: "a", count: 33)
        #expect(f.validate(r).failure?.status == .badRequest)
        r.topic = "has space"
        #expect(f.validate(r).failure?.status == .badRequest)
    }

    @Test func aPayloadOver4096BytesIs413() throws {
        let f = PushFixtures()
        var r = try f.request()
        r.body = Array(repeating: 1, count: 4097)
        #expect(f.validate(r).failure?.status == .payloadTooLarge)
    }

    @Test func aPayloadThatDoesNotDecryptIs400WithTheReason() throws {
        let f = PushFixtures()
        var r = try f.request()
        r.body[r.body.count - 1] ^= 1
        let refusal = f.validate(r).failure
        #expect(refusal?.status == .badRequest && refusal?.reason.contains("does not decrypt") == true)
        // Encrypted to another browser's keys.
        r = try PushFixtures().request()
        r.authorization = try f.request().authorization
        #expect(f.validate(r).failure?.status == .badRequest)
        r = try f.request()
        r.contentEncoding = nil
        #expect(f.validate(r).failure?.status == .badRequest)
        r.contentEncoding = "gzip"
        #expect(f.validate(r).failure?.status == .unsupportedMediaType)
        let (body, _, dh) = try f.aesgcm("x")
        let aesgcm = PushRequest(ttl: "1", contentEncoding: "aesgcm", cryptoKey: dh, authorization: try f.vapid(), body: body)
        #expect(f.validate(aesgcm).failure?.reason.contains("Encryption header") == true)
    }

    @Test func aPushWithoutPayloadIsTaken() throws {
        let f = PushFixtures()
        let accepted = try f.validate(PushRequest(ttl: "5", authorization: try f.vapid())).get()
        #expect(accepted.encoding == nil && accepted.body.isEmpty)
    }

    @Test func anApplicationServerKeyRestrictsTheSubscription() throws {
        var f = PushFixtures()
        f.applicationServerKey = f.server.publicKeyBase64URL
        #expect(throws: Never.self) { try f.validate(try f.request()).get() }
        f.applicationServerKey = VAPIDFixture.otherKey
        let refusal = f.validate(try f.request()).failure
        #expect(refusal?.status == .forbidden && refusal?.reason.contains("applicationServerKey") == true)
    }
}

enum VAPIDFixture {
    static let otherKey = Base64URL.encode(P256.Signing.PrivateKey().publicKey.x963Representation)
}

extension Result {
    var failure: Failure? {
        if case .failure(let f) = self { return f }
        return nil
    }
}
