@testable import CCSEngine
import DeliveryCore
import Locking
import PushDomain
import StoreModel
import Testing

/// The engine as the router's host: the links and the live writes' tickets it keeps beside the
/// router (`State.appServers`, `State.upstreamWrites`) follow the router's connections and live
/// writes, and the router's draining flag follows the link's.
@Suite struct OutboundHostTests {
    static let to = "111@gcm.googleapis.com"

    @Test func anACKBeforeTheLiveWriteCallsItOffAndEmptiesTheHostsTables() async throws {
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let d = try await h.register()
        let server = h.appServer(id: "c1")
        #expect(h.engine.state.withLock { Set($0.appServers.keys) == Set($0.outbound.connections.keys) })
        let outcome = Locked<UpstreamOutcome?>(nil)
        h.engine.upstream(from: d.token, UpstreamRequest(messageID: "u1", to: Self.to)) { o in outcome.withLock { $0 = o } }
        #expect(server.ids == ["u1"])
        #expect(h.engine.state.withLock { $0.upstreamWrites.count } == 1, "the held write's ticket is the host's")
        h.engine.appServerAcknowledged(connectionID: "c1", messageID: "u1", to: d.token)
        #expect(outcome.withLock { $0 } == .sent(messageID: "u1"), "called off: the device hears sent from the ACK")
        #expect(h.engine.state.withLock { $0.upstreamWrites.isEmpty })
        await h.settle()
        #expect(try h.engine.store.loadOutbound().isEmpty, "a write called off never reaches the store")
        h.engine.connectionClosed(id: "c1")
        #expect(h.engine.state.withLock { $0.appServers.isEmpty && $0.outbound.connections.isEmpty })
    }

    @Test func anACKAfterTheWriterTookTheLiveWriteRemovesItAndTheCommitAnswered() async throws {
        let h = try Harness()
        let d = try await h.register()
        let server = h.appServer(id: "c1")
        let outcome = Locked<UpstreamOutcome?>(nil)
        h.engine.upstream(from: d.token, UpstreamRequest(messageID: "u1", to: Self.to)) { o in outcome.withLock { $0 = o } }
        #expect(server.ids == ["u1"])
        await h.settle()
        #expect(outcome.withLock { $0 } == .sent(messageID: "u1"), "the commit answered")
        #expect(h.engine.state.withLock { $0.upstreamWrites.isEmpty })
        #expect(try h.engine.store.loadOutbound().map(\.messageID) == ["u1"])
        h.engine.appServerAcknowledged(connectionID: "c1", messageID: "u1", to: d.token)
        await h.settle()
        #expect(try h.engine.store.loadOutbound().isEmpty, "the ACK removed what the commit wrote")
    }

    @Test func theRoutersDrainingFlagFollowsTheLink() async throws {
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let d = try await h.register()
        let first = h.appServer(id: "c1")
        let second = h.appServer(id: "c2")
        // What the XMPP link does as it starts draining: its flag, then the engine.
        first.drain()
        h.engine.connectionDraining(id: "c1")
        let late = FakeAppServer()
        late.drain()
        #expect(h.engine.connectionOpened(AppServerConnectionInfo(id: "c3", senderID: "111", remoteAddress: "test",
                                                                  connectedAtMillis: 0), link: late))
        let flags = h.engine.state.withLock { s in s.outbound.connections.mapValues(\.draining) }
        #expect(flags == ["c1": true, "c2": false, "c3": true])
        #expect(h.engine.connections().allSatisfy { flags[$0.info.id] == $0.draining })
        for i in 1...3 { h.engine.upstream(from: d.token, UpstreamRequest(messageID: "u\(i)", to: Self.to)) { _ in } }
        await h.settle()
        #expect(first.ids.isEmpty && late.ids.isEmpty)
        #expect(second.ids == ["u1", "u2", "u3"])
    }
}
