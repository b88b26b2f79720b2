import PushDomain
import Testing
@testable import WebPushService

/// Whatever a client sends, the validator answers with a refusal (or, for a valid request, an
/// acceptance) and never traps: truncated and altered bodies, odd header values, random bytes.
@Suite struct HostileInputTests {

    @Test func alteredBodiesAreRefusedWithAReason() throws {
        let f = PushFixtures()
        let good = try f.request("payload")
        var rng = SplitMix64(seed: 42)
        for _ in 0..<300 {
            var r = good
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: r.body = Array(r.body.prefix(Int.random(in: 0..<r.body.count, using: &rng)))
            case 1: r.body[Int.random(in: 0..<r.body.count, using: &rng)] ^= UInt8.random(in: 1 ... .max, using: &rng)
            case 2: r.body = (0..<Int.random(in: 0...4096, using: &rng)).map { _ in UInt8.random(in: 0 ... .max, using: &rng) }
            default: r.contentEncoding = "aesgcm"
            }
            if case .failure(let refusal) = f.validate(r) { #expect(!refusal.reason.isEmpty) }
        }
    }

    @Test func oddHeaderValuesAreRefused() throws {
        let f = PushFixtures()
        let good = try f.request()
        let odd = ["", " ", "-0", "+1", "0x10", "١٢", String(repeating: "9", count: 30), "\u{0}", "a=b;c", ";;;,,,", "salt=", "dh=;p256ecdsa="]
        for value in odd {
            var r = good
            r.ttl = value
            if case .success = f.validate(r) { #expect(Bool(false), "TTL \(value) accepted") }
            r = good
            r.contentEncoding = "aesgcm"
            r.encryption = value
            r.cryptoKey = value
            #expect(f.validate(r).failure != nil)
            r = good
            r.authorization = "vapid t=\(value), k=\(value)"
            #expect(f.validate(r).failure?.status == .unauthorized)
        }
    }
}
