import AppServerAudit
import Synchronization
import Testing

/// A clock the test moves by hand.
final class TestClock: Sendable {
    let millis = Atomic<Int64>(1_000_000)
    func advance(_ ms: Int64) { millis.add(ms, ordering: .relaxed) }
    var now: @Sendable () -> Int64 { { [self] in millis.load(ordering: .relaxed) } }
}

@Suite struct AuditorTests {
    let clock = TestClock()
    var audit: Auditor { Auditor(now: clock.now) }

    func rules(_ a: Auditor, _ sender: String = "1") -> Set<AuditRule> {
        Set(a.findings(sender: sender).map(\.rule))
    }

    @Test func aCarefulConnectionIsClean() {
        let a = audit
        a.connectionOpened("c1", sender: "1")
        a.downstreamReceived(connection: "c1", messageID: "m1", to: "t1")
        a.downstreamAnswered(connection: "c1", messageID: "m1", to: "t1", answer: .ack)
        a.outboundSent(connection: "c1", messageID: "u1", receipt: false)
        a.outboundSent(connection: "c1", messageID: "dr2:m1", receipt: true)
        a.outboundAcknowledged(connection: "c1", messageID: "u1")
        a.outboundAcknowledged(connection: "c1", messageID: "m1")  // a receipt ACKed without dr2:
        clock.advance(60_000)
        a.connectionClosed("c1")
        #expect(a.findings().isEmpty)
        let report = a.report()
        #expect(report["clean"] == .bool(true))
        #expect(report["senders"]?.arrayValue?.first?["rules"]?["ack-upstream"]?["kept"] == .int(1))
        #expect(report["senders"]?.arrayValue?.first?["rules"]?["ack-receipts"]?["kept"] == .int(1))
    }

    @Test func unackedUpstreamIsFoundOnCloseAndAfterTheGrace() {
        let a = audit
        a.connectionOpened("c1", sender: "1")
        a.outboundSent(connection: "c1", messageID: "u1", receipt: false)
        #expect(a.findings().isEmpty, "still within the grace")
        clock.advance(a.limits.ackGraceMillis + 1)
        #expect(rules(a) == [.ackUpstream])
        a.connectionOpened("c2", sender: "1")
        a.outboundSent(connection: "c2", messageID: "dr2:x", receipt: true)
        a.connectionClosed("c2")
        #expect(rules(a) == [.ackUpstream, .ackReceipts])
        let f = a.findings().first { $0.rule == .ackReceipts }!
        #expect(f.evidence.first?.messageID == "dr2:x")
        #expect(f.connection == "c2")
    }

    @Test func moreThan100Pending() {
        let a = audit
        a.connectionOpened("c1", sender: "1")
        for i in 0..<101 { a.downstreamReceived(connection: "c1", messageID: "m\(i)", to: "t") }
        #expect(rules(a) == [.pendingLimit])
        #expect(a.findings().count == 1)
    }

    @Test func drainingRules() {
        let a = audit
        a.connectionOpened("c1", sender: "1")
        a.drained(connection: "c1")
        a.downstreamReceived(connection: "c1", messageID: "early", to: "t")  // already on its way
        #expect(a.findings().isEmpty)
        clock.advance(a.limits.drainInFlightMillis + 1)
        a.downstreamReceived(connection: "c1", messageID: "late", to: "t")
        #expect(rules(a) == [.drainNoSend])
        clock.advance(a.limits.reconnectGraceMillis)
        #expect(rules(a) == [.drainNoSend, .drainReconnect])

        let b = audit
        b.connectionOpened("c1", sender: "1")
        b.drained(connection: "c1")
        b.connectionOpened("c2", sender: "1")
        clock.advance(b.limits.reconnectGraceMillis * 2)
        b.connectionClosed("c1")
        #expect(b.findings().isEmpty)
    }

    @Test func backoffAfterServiceUnavailable() {
        let a = audit
        a.connectionOpened("c1", sender: "1")
        a.downstreamReceived(connection: "c1", messageID: "m1", to: "t")
        a.downstreamAnswered(connection: "c1", messageID: "m1", to: "t", answer: .nack(code: "SERVICE_UNAVAILABLE"))
        clock.advance(1_000)
        a.downstreamReceived(connection: "c1", messageID: "m1", to: "t")  // waited 1 s: kept
        a.downstreamAnswered(connection: "c1", messageID: "m1", to: "t", answer: .nack(code: "SERVICE_UNAVAILABLE"))
        clock.advance(1_000)
        a.downstreamReceived(connection: "c1", messageID: "m1", to: "t")  // second retry after 1 s, not 2: broken
        #expect(rules(a) == [.retryBackoff])
        a.downstreamAnswered(connection: "c1", messageID: "m1", to: "t", answer: .ack)
        clock.advance(10)
        a.downstreamReceived(connection: "c1", messageID: "m1", to: "t")
        #expect(rules(a) == [.retryBackoff, .noResendAcked])
    }

    @Test func httpRetryAfterAndUnregisteredTokens() {
        let a = audit
        a.httpSend(sender: "1", api: "v1", targetKey: "token:t", tokens: ["t"], status: 503, retryAfterSeconds: 5, unregistered: [])
        clock.advance(2_000)
        a.httpSend(sender: "1", api: "v1", targetKey: "token:t", tokens: ["t"], status: 404, retryAfterSeconds: nil, unregistered: ["t"])
        #expect(rules(a) == [.retryBackoff])
        a.httpSend(sender: "1", api: "v1", targetKey: "token:t", tokens: ["t"], status: 404, retryAfterSeconds: nil, unregistered: ["t"])
        #expect(rules(a) == [.retryBackoff, .dropUnregistered])
        #expect(a.findings(sender: "2").isEmpty)
        // Findings about HTTP requests cite Google's public pages, not the CCS spec.
        #expect(a.findings().allSatisfy { $0.source == $0.rule.httpSource && $0.source.hasPrefix("https://") })
        let listed = a.report()["rules"]?.arrayValue?.first { $0["id"] == "retry-backoff" }
        #expect(listed?["http_source"]?.stringValue == AuditRule.retryBackoff.httpSource)
    }

    /// A 400 remembers the request's body: the same body again is the finding, another body keeps the rule.
    @Test func httpInvalidRequestsAreNotSentAgain() {
        let a = audit
        a.httpSend(sender: "1", api: "v1", targetKey: "token:t", tokens: ["t"], status: 400, retryAfterSeconds: nil,
                   unregistered: [], bodyDigest: 7)
        a.httpSend(sender: "1", api: "v1", targetKey: "token:t", tokens: ["t"], status: 200, retryAfterSeconds: nil,
                   unregistered: [], bodyDigest: 8)
        #expect(rules(a).isEmpty)
        clock.advance(5_000)
        a.httpSend(sender: "1", api: "v1", targetKey: "token:t", tokens: ["t"], status: 200, retryAfterSeconds: nil,
                   unregistered: [], bodyDigest: 7, accessToken: "…abc")
        #expect(rules(a) == [.noRetryInvalid])
        let finding = a.findings(sender: "1")[0]
        #expect(finding.evidence.map(\.at) == [1_000_000, 1_005_000])
        #expect(finding.evidence[1].what.contains("access token …abc") && finding.evidence[1].what.contains("answered 200"))
        #expect(a.findings(sender: "2").isEmpty)
    }

    @Test func httpMessagesOverTheLimits() {
        let a = audit
        a.httpSend(sender: "1", api: "legacy", targetKey: "token:t", tokens: ["t"], status: 200, retryAfterSeconds: nil, unregistered: [])
        #expect(rules(a).isEmpty)
        a.httpSend(sender: "1", api: "legacy", targetKey: "x", tokens: [], status: 200, retryAfterSeconds: nil, unregistered: [],
                   limit: "MessageTooBig")
        #expect(rules(a) == [.messageLimits])
        #expect(a.findings(sender: "1")[0].text.contains("MessageTooBig"))
    }

    /// One token serves many sends; a new one while the last had long to live is the finding; after
    /// a 401 a new one is expected, and the refused one presented again is the finding.
    @Test func accessTokensAreReusedAndRefreshed() {
        let a = audit
        let hour: Int64 = 3_599_000
        a.accessTokenFetched(sender: "1", id: "…t1", expiresAtMillis: clock.now() + hour)
        for _ in 0..<3 {
            a.httpSend(sender: "1", api: "v1", targetKey: "token:t", tokens: ["t"], status: 200, retryAfterSeconds: nil,
                       unregistered: [], accessToken: "…t1")
        }
        #expect(rules(a).isEmpty)
        #expect(a.report()["senders"]?.arrayValue?.first?["rules"]?["reuse-access-token"]?["kept"] == .int(3))

        // Near its expiry a new token is fine; an hour early it is not.
        clock.advance(hour - a.limits.tokenRefreshMarginMillis + 1)
        a.accessTokenFetched(sender: "1", id: "…t2", expiresAtMillis: clock.now() + hour)
        #expect(rules(a).isEmpty)
        a.accessTokenFetched(sender: "1", id: "…t3", expiresAtMillis: clock.now() + hour)
        #expect(rules(a) == [.reuseAccessToken])

        // Refused: a new token is fetched and used (kept); the old one again is the finding.
        let b = audit
        b.accessTokenFetched(sender: "1", id: "…t1", expiresAtMillis: clock.now() + hour)
        b.accessTokenRefused(sender: "1", id: "…t1", api: "v1")
        b.accessTokenFetched(sender: "1", id: "…t2", expiresAtMillis: clock.now() + hour)
        b.httpSend(sender: "1", api: "v1", targetKey: "token:t", tokens: ["t"], status: 200, retryAfterSeconds: nil,
                   unregistered: [], accessToken: "…t2")
        #expect(rules(b).isEmpty)
        #expect(b.report()["senders"]?.arrayValue?.first?["rules"]?["refresh-access-token"]?["kept"] == .int(1))
        b.accessTokenRefused(sender: "1", id: "…t1", api: "v1")
        #expect(rules(b) == [.refreshAccessToken])
    }

    /// CCS's own DEVICE_UNREGISTERED marks the token, and the next send to it on any connection of
    /// the sender is the finding; other tokens stay clean.
    @Test func ccsSendsToATokenReportedUnregistered() {
        let a = audit
        a.connectionOpened("c1", sender: "1")
        a.downstreamReceived(connection: "c1", messageID: "m1", to: "gone")
        a.downstreamAnswered(connection: "c1", messageID: "m1", to: "gone", answer: .nack(code: "DEVICE_UNREGISTERED"))
        a.downstreamReceived(connection: "c1", messageID: "m2", to: "other")
        a.downstreamAnswered(connection: "c1", messageID: "m2", to: "other", answer: .ack)
        #expect(rules(a).isEmpty)
        a.connectionOpened("c2", sender: "1")
        a.downstreamReceived(connection: "c2", messageID: "m3", to: "gone")
        #expect(rules(a) == [.dropUnregistered])
    }

    /// An answer that names a canonical registration id (a CCS ACK's, a legacy result's) marks the old
    /// token; sending to it again is the finding, sending to the new one keeps the rule.
    @Test func sendsToATokenWhoseCanonicalIDWasNamed() {
        let a = audit
        a.connectionOpened("c1", sender: "1")
        a.downstreamReceived(connection: "c1", messageID: "m1", to: "old")
        a.downstreamAnswered(connection: "c1", messageID: "m1", to: "old", answer: .ack, canonical: "new")
        a.downstreamReceived(connection: "c1", messageID: "m2", to: "new")
        a.downstreamAnswered(connection: "c1", messageID: "m2", to: "new", answer: .ack)
        #expect(rules(a).isEmpty)
        #expect(a.report()["senders"]?.arrayValue?.first?["rules"]?["use-canonical-id"]?["kept"] == .int(1))
        a.downstreamReceived(connection: "c1", messageID: "m3", to: "old")
        #expect(rules(a) == [.useCanonicalID])
        let finding = a.findings(sender: "1")[0]
        #expect(finding.evidence.count == 2 && finding.evidence[0].what.contains("new"))

        // Over HTTP: the legacy result's registration_id; another sender's tokens are its own.
        a.httpSend(sender: "2", api: "legacy", targetKey: "token:o", tokens: ["o"], status: 200, retryAfterSeconds: nil,
                   unregistered: [], canonical: [(old: "o", new: "n")])
        #expect(a.findings(sender: "2").isEmpty)
        a.httpSend(sender: "3", api: "legacy", targetKey: "token:o", tokens: ["o"], status: 200, retryAfterSeconds: nil,
                   unregistered: [])
        #expect(a.findings(sender: "3").isEmpty)
        a.httpSend(sender: "2", api: "v1", targetKey: "token:o", tokens: ["o"], status: 200, retryAfterSeconds: nil,
                   unregistered: [])
        #expect(rules(a, "2") == [.useCanonicalID])
    }

    @Test func malformedStanzasAndReset() {
        let a = audit
        a.connectionOpened("c1", sender: "1")
        a.downstreamReceived(connection: "c1", messageID: "m1", to: "t")
        a.downstreamAnswered(connection: "c1", messageID: "m1", to: "t", answer: .nack(code: "INVALID_JSON"))
        a.downstreamAnswered(connection: "c1", messageID: "", to: nil, answer: .stanzaError("missing message_id"))
        #expect(a.findings().count == 2)
        #expect(rules(a) == [.wellFormed])
        a.reset(sender: "1")
        #expect(a.findings().isEmpty)
    }

    @Test func memoryIsBoundedAcrossSenders() {
        var limits = Auditor.Limits()
        limits.maxTrackedIDs = 50
        let a = Auditor(limits: limits, now: clock.now)
        for sender in 0..<20 {
            a.connectionOpened("c\(sender)", sender: "\(sender)")
            for i in 0..<20 {
                a.downstreamReceived(connection: "c\(sender)", messageID: "m\(i)", to: "t")
                a.downstreamAnswered(connection: "c\(sender)", messageID: "m\(i)", to: "t", answer: .ack)
                a.downstreamReceived(connection: "c\(sender)", messageID: "r\(i)", to: "t")
                a.downstreamAnswered(connection: "c\(sender)", messageID: "r\(i)", to: "t", answer: .nack(code: "SERVICE_UNAVAILABLE"))
            }
        }
        let (acked, retries) = a.trackedCounts
        #expect(acked <= 50 && retries <= 50, "acked \(acked), retries \(retries)")
        // The newest are the ones kept: the last sender's resend of an ACKed id is still caught.
        a.downstreamReceived(connection: "c19", messageID: "m19", to: "t")
        #expect(a.findings(sender: "19").map(\.rule) == [.noResendAcked])
    }
}

