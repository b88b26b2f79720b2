@testable import DeliveryCore
import PushDomain
import StoreModel
import Testing

/// The app-server side as a state machine: events in, effects out, with no store, links, clock or
/// threads. Each test plays what the engine would feed the router and reads what it asks back.
@Suite struct OutboundEventTests {
    static let rules = OutboundRules(window: 2, ackTimeoutMillis: 1_000, maxConnectionsPerSender: 2,
                                     maxPendingPerSender: 3, clustered: false)
    static var clustered: OutboundRules {
        var r = rules
        r.clustered = true
        return r
    }

    static func upstream(_ id: String, token: String = "t", sender: String = "111", createdAt: Int64 = 0,
                         expiresAt: Int64 = 60_000) -> OutboundRecord {
        OutboundRecord(senderID: sender, kind: .upstream, messageID: id, token: token, json: "{}", createdAt: createdAt,
                       expiresAt: expiresAt)
    }

    static func receipt(_ about: String, token: String = "t") -> OutboundRecord {
        OutboundRecord(senderID: "111", kind: .receipt, messageID: "dr2:" + about, token: token, json: "{}",
                       createdAt: 0, expiresAt: 60_000, aboutMessageID: about)
    }

    /// The effects as short lines, so that a test states the whole answer (its order included).
    static func lines(_ effects: [OutboundEffect]) -> [String] {
        effects.map { effect in
            switch effect {
            case .handOut(let sender, let handed):
                "handOut \(sender): " + handed.map { "\($0.record.messageID)→\($0.connection)" }.joined(separator: " ")
            case .refused(let connection): "refused \(connection)"
            case .receiptAcked(let r, let connection): "receiptAcked \(r.aboutMessageID ?? "?") on \(connection)"
            case .write(let ops, let removing):
                "write \(ops.map(op).joined(separator: " "))" + (removing.map { " removing \($0.messageID)" } ?? "")
            case .writeLive(let r, _): "writeLive \(r.messageID)"
            case .callOffLiveWrite(_, let answer, let otherwise):
                "callOffLiveWrite answer \(outcome(answer)) otherwise \(otherwise.map(op).joined(separator: " "))"
            case .callOff: "callOff"
            case .answer(_, let answer): "answer \(outcome(answer))"
            case .release(let records): "release " + records.map(\.messageID).joined(separator: " ")
            case .claim(let sender): "claim \(sender)"
            case .queueFull(let sender, let count): "queueFull \(sender) \(count)"
            case .drop(let r, let error): "drop \(r.messageID) \(error.rawValue)"
            }
        }
    }

    static func op(_ op: StoreOp) -> String {
        if case .removeOutbound(_, _, _, let id) = op { return "remove(\(id))" }
        return "\(op)"
    }

    static func outcome(_ o: UpstreamOutcome) -> String {
        switch o {
        case .sent(let id): "sent(\(id))"
        case .sendError(let id, let error): "sendError(\(id), \(error.rawValue))"
        }
    }

    /// A router with these connections of sender 111 open.
    static func router(_ ids: [String], rules: OutboundRules = rules) -> OutboundRouter {
        var router = OutboundRouter()
        for id in ids {
            let effects = Self.lines(router.handle(.connectionOpened(id: id, sender: "111", draining: false), at: 0, rules))
            #expect(effects == (rules.clustered ? ["claim 111"] : []))
        }
        return router
    }

    @Test func aConnectionPastTheSendersLimitIsRefusedAndInAClusterAnOpenedOneClaims() {
        var router = Self.router(["a", "b"])
        #expect(Self.lines(router.handle(.connectionOpened(id: "c", sender: "111", draining: false), at: 0, Self.rules))
                == ["refused c"])
        #expect(router.connections["c"] == nil)
        var clustered = OutboundRouter()
        #expect(Self.lines(clustered.handle(.connectionOpened(id: "a", sender: "111", draining: false), at: 0, Self.clustered))
                == ["claim 111"])
    }

    @Test func aCommittedRecordGoesOutUpToTheWindowAndTheOldestPastTheQueueLimitIsDropped() {
        var router = Self.router(["a"])
        #expect(Self.lines(router.handle(.committed(Self.upstream("m1")), at: 0, Self.rules)) == ["handOut 111: m1→a"])
        #expect(Self.lines(router.handle(.committed(Self.upstream("m2")), at: 0, Self.rules)) == ["handOut 111: m2→a"])
        for id in ["m3", "m4", "m5"] { #expect(router.handle(.committed(Self.upstream(id)), at: 0, Self.rules).isEmpty) }
        #expect(Self.lines(router.handle(.committed(Self.upstream("m6")), at: 0, Self.rules))
                == ["queueFull 111 1", "drop m3 TOO_MANY_MESSAGES"])
        #expect(router.pending["111"]?.map(\.messageID) == ["m4", "m5", "m6"])
    }

    @Test func anACKRemovesTheItemReportsAReceiptAndLetsTheNextOneOut() {
        var router = Self.router(["a"])
        _ = router.handle(.committed(Self.receipt("0:1")), at: 0, Self.rules)
        _ = router.handle(.committed(Self.upstream("m1")), at: 0, Self.rules)
        _ = router.handle(.committed(Self.upstream("m2")), at: 0, Self.rules)
        #expect(Self.lines(router.handle(.acknowledged(connection: "b", messageID: "0:1", to: nil), at: 0, Self.rules)).isEmpty,
                "only the connection that received it can ACK it")
        #expect(Self.lines(router.handle(.acknowledged(connection: "a", messageID: "0:1", to: nil), at: 0, Self.rules))
                == ["receiptAcked 0:1 on a", "write remove(dr2:0:1)", "handOut 111: m2→a"])
        #expect(router.handle(.acknowledged(connection: "a", messageID: "0:1", to: nil), at: 0, Self.rules).isEmpty,
                "a second ACK finds nothing")
    }

    @Test func inAClusterAnACKedItemIsRemovingUntilItsRemovalCommits() {
        var router = Self.router(["a"], rules: Self.clustered)
        _ = router.handle(.committed(Self.upstream("m1")), at: 0, Self.clustered)
        #expect(Self.lines(router.handle(.acknowledged(connection: "a", messageID: "m1", to: "t"), at: 0, Self.clustered))
                == ["write remove(m1) removing m1"])
        #expect(router.removing == [Self.upstream("m1").key])
        #expect(router.handle(.removalCommitted(Self.upstream("m1").key), at: 0, Self.clustered).isEmpty)
        #expect(router.removing.isEmpty)
    }

    @Test func aLiveUpstreamGoesOutBeforeItsWriteAndAnACKCallsTheWriteOff() {
        var router = Self.router(["a"])
        let m1 = Self.upstream("m1")
        #expect(router.claimUpstreamID("m1", for: UpstreamHolder(sender: "111", token: "t"), limit: 10) == .claimed)
        let effects = router.handle(.upstreamAccepted(m1), at: 0, Self.rules)
        #expect(Self.lines(effects) == ["writeLive m1", "handOut 111: m1→a"], "the write is submitted before the hand-out")
        #expect(Self.lines(router.handle(.acknowledged(connection: "a", messageID: "m1", to: "t"), at: 0, Self.rules))
                == ["callOffLiveWrite answer sent(m1) otherwise remove(m1)"])
        #expect(router.upstreamIDs.isEmpty, "an ACKed id may be used again")
        // The writer had taken it already: its commit answers the device, and the id stays free.
        guard case .writeLive(_, let write) = effects[0] else { Issue.record("no live write"); return }
        #expect(Self.lines(router.handle(.liveWriteFinished(m1, write: write, failed: false), at: 0, Self.rules))
                == ["answer sent(m1)"])
    }

    @Test func aLiveWriteThatFailsAnswersAnErrorAndFreesTheID() {
        var router = Self.router(["a"])
        let m1 = Self.upstream("m1")
        _ = router.claimUpstreamID("m1", for: UpstreamHolder(sender: "111", token: "t"), limit: 10)
        guard case .writeLive(_, let write)? = router.handle(.upstreamAccepted(m1), at: 0, Self.rules).first else {
            Issue.record("not live"); return
        }
        #expect(Self.lines(router.handle(.liveWriteFinished(m1, write: write, failed: true), at: 0, Self.rules))
                == ["answer sendError(m1, INTERNAL_SERVER_ERROR)"])
        #expect(router.upstreamIDs.isEmpty)
        #expect(router.takeLive(m1.key) == nil, "the write's entry is gone")
    }

    @Test func anUpstreamWriteThatFailsFreesItsIDAndNothingElse() {
        var router = Self.router(["a"])
        let holder = UpstreamHolder(sender: "111", token: "t")
        #expect(router.claimUpstreamID("m1", for: holder, limit: 10) == .claimed)
        #expect(router.handle(.writeFailed(Self.upstream("m1")), at: 0, Self.rules).isEmpty)
        #expect(router.claimUpstreamID("m1", for: holder, limit: 10) == .claimed, "the id may be used again")
    }

    @Test func anUpstreamMessageIsNotLiveBehindAQueueWithoutRoomOrInACluster() {
        var router = Self.router(["a"])
        _ = router.handle(.committed(Self.upstream("m1")), at: 0, Self.rules)
        _ = router.handle(.committed(Self.upstream("m2")), at: 0, Self.rules)
        #expect(router.handle(.upstreamAccepted(Self.upstream("m3")), at: 0, Self.rules).isEmpty, "no room")
        #expect(router.isQueueEmpty(sender: "111"), "a live try that fails leaves nothing behind")
        _ = router.handle(.committed(Self.upstream("m3")), at: 0, Self.rules)
        #expect(router.handle(.upstreamAccepted(Self.upstream("m4")), at: 0, Self.rules).isEmpty, "something waits")
        #expect(router.pending["111"]?.map(\.messageID) == ["m3"])
        var clustered = Self.router(["a"], rules: Self.clustered)
        #expect(clustered.handle(.upstreamAccepted(Self.upstream("m1")), at: 0, Self.clustered).isEmpty)
    }

    @Test func theTickDropsWhatExpiredAndSendsAgainWhatWasNotACKedInTime() {
        var router = Self.router(["a", "b"])
        _ = router.handle(.committed(Self.upstream("m1", expiresAt: 500)), at: 0, Self.rules)
        _ = router.handle(.committed(Self.upstream("m2", expiresAt: 60_000)), at: 0, Self.rules)
        _ = router.handle(.connectionDraining(id: "b"), at: 0, Self.rules)
        #expect(Self.lines(router.handle(.tick, at: 500, Self.rules)) == ["drop m1 TTL_EXCEEDED"])
        #expect(Self.lines(router.handle(.tick, at: 999, Self.rules)).isEmpty, "not yet due")
        let again = Self.lines(router.handle(.tick, at: 1_000, Self.rules))
        #expect(again == ["handOut 111: m2→a"], "sent again, never to the draining connection")
    }

    @Test func anExpiredLiveUpstreamHasItsWriteCalledOffBeforeItIsDropped() {
        var router = Self.router(["a"])
        let m1 = Self.upstream("m1", expiresAt: 0)  // time to live 0: now or never
        _ = router.handle(.upstreamAccepted(m1), at: 0, Self.rules)
        #expect(Self.lines(router.handle(.tick, at: 0, Self.rules)) == ["callOff", "drop m1 TTL_EXCEEDED"])
    }

    @Test func aDrainingConnectionTakesNothingNewAndInAClusterItsSendersQueueIsReleased() {
        var router = Self.router(["a"], rules: Self.clustered)
        _ = router.handle(.committed(Self.upstream("m1")), at: 0, Self.clustered)
        _ = router.handle(.committed(Self.upstream("m2")), at: 0, Self.clustered)
        _ = router.handle(.committed(Self.upstream("m3")), at: 0, Self.clustered)
        #expect(Self.lines(router.handle(.connectionDraining(id: "a"), at: 0, Self.clustered)) == ["release m3"])
        #expect(!router.hasOpenConnection(sender: "111") && router.connections["a"]?.draining == true)
        #expect(router.releasing.keys.map(\.messageID) == ["m3"])
        #expect(Self.lines(router.handle(.committed(Self.upstream("m4")), at: 0, Self.clustered)) == ["release m4"])
        #expect(Self.lines(router.handle(.committed(Self.upstream("m5", expiresAt: 0)), at: 0, Self.clustered))
                == ["drop m5 TTL_EXCEEDED"], "one taken for its expiry is given up here")
        _ = router.handle(.releaseCommitted([Self.upstream("m3"), Self.upstream("m4")]), at: 0, Self.clustered)
        #expect(router.releasing.isEmpty)
        #expect(router.handle(.connectionDraining(id: "x"), at: 0, Self.clustered).isEmpty, "unknown connection")
    }

    @Test func aClosedConnectionsItemsGoBackFirstToTheSendersOpenConnections() {
        var rules = Self.rules
        rules.maxConnectionsPerSender = 3
        var router = Self.router(["a", "b"], rules: rules)
        _ = router.handle(.connectionDraining(id: "b"), at: 0, rules)
        _ = router.handle(.committed(Self.upstream("m1", createdAt: 1)), at: 0, rules)
        _ = router.handle(.committed(Self.upstream("m2", createdAt: 2)), at: 0, rules)
        _ = router.handle(.committed(Self.upstream("m3", createdAt: 3)), at: 0, rules)
        #expect(router.pending["111"]?.map(\.messageID) == ["m3"], "a's window is full, b drains")
        #expect(Self.lines(router.handle(.connectionOpened(id: "c", sender: "111", draining: false), at: 0, rules))
                == ["handOut 111: m3→c"])
        #expect(Self.lines(router.handle(.connectionClosed(id: "a"), at: 0, rules)) == ["handOut 111: m1→c"])
        #expect(router.pending["111"]?.map(\.messageID) == ["m2"], "the oldest first, up to the window")
        #expect(router.handle(.connectionClosed(id: "a"), at: 0, rules).isEmpty, "closed once")
    }
}
