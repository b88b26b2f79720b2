@testable import DeliveryCore
import PushDomain
import StoreModel
import Testing

/// The outbound router keeps each sender's queue, each connection's window and the upstream ids in
/// step: what it hands out is on exactly one window, and a closed connection's items come back first.
@Suite struct OutboundRouterTests {
    static func record(_ id: String, token: String = "t", sender: String = "111", expiresAt: Int64 = 60_000) -> OutboundRecord {
        OutboundRecord(senderID: sender, kind: .upstream, messageID: id, token: token, json: "{}", createdAt: 0,
                       expiresAt: expiresAt)
    }

    static func router(connections: [String], limit: Int = 10) -> OutboundRouter {
        var router = OutboundRouter()
        for id in connections {
            let added = router.addConnection(id: id, sender: "111", limit: limit)
            #expect(added)
        }
        return router
    }

    @Test func eachRecordGoesToTheFreestWindowAndNoneToADrainingConnection() {
        var router = Self.router(connections: ["a", "b", "c"])
        #expect(router.markDraining("c") == "111")
        for i in 1...5 { router.append(Self.record("m\(i)")) }
        let handed = router.dispatch(sender: "111", window: 2, now: 0)
        #expect(handed.count == 4)
        #expect(Set(handed.map(\.connection)) == ["a", "b"])
        #expect(router.pending["111"]?.map(\.messageID) == ["m5"])
        #expect(router.connections["a"]!.inFlight.count == 2 && router.connections["b"]!.inFlight.count == 2)
    }

    @Test func onlyTheConnectionThatReceivedAnItemCanACKIt() {
        var router = Self.router(connections: ["a", "b"])
        router.append(Self.record("m1"))
        let on = router.dispatch(sender: "111", window: 5, now: 0)[0].connection
        let other = on == "a" ? "b" : "a"
        #expect(router.acknowledge(connectionID: other, messageID: "m1", to: "t") == nil)
        #expect(router.acknowledge(connectionID: on, messageID: "m1", to: "t")?.sender == "111")
        #expect(router.acknowledge(connectionID: on, messageID: "m1", to: "t") == nil, "a second ACK finds nothing")
    }

    @Test func aClosedConnectionsItemsGoBackToTheFrontOfTheQueue() {
        var router = Self.router(connections: ["a"])
        router.append(Self.record("m1"))
        _ = router.dispatch(sender: "111", window: 1, now: 0)
        router.append(Self.record("m2"))
        #expect(router.removeConnection("a") == "111")
        #expect(router.pending["111"]?.map(\.messageID) == ["m1", "m2"])
        #expect(router.connectionsBySender["111"] == [] && !router.hasOpenConnection(sender: "111"))
    }

    @Test func aSenderHasAtMostItsLimitOfConnections() {
        var router = Self.router(connections: ["a"], limit: 1)
        let added = router.addConnection(id: "b", sender: "111", limit: 1)
        #expect(!added && router.connections["b"] == nil)
    }

    @Test func anUpstreamIDIsTakenUntilReleasedAndADeviceHoldsAtMostTheLimit() {
        var router = OutboundRouter()
        let holder = UpstreamHolder(sender: "111", token: "t")
        let first = router.claimUpstreamID("u1", for: holder, limit: 2)
        let again = router.claimUpstreamID("u1", for: holder, limit: 2)
        let second = router.claimUpstreamID("u2", for: holder, limit: 2)
        let third = router.claimUpstreamID("u3", for: holder, limit: 2)
        #expect(first == .claimed && again == .duplicate && second == .claimed && third == .tooMany)
        router.releaseUpstreamID(of: Self.record("u1"))
        router.releaseUpstreamID(of: Self.record("u2"))
        #expect(router.upstreamIDs.isEmpty)
    }

    @Test func forgettingASenderLeavesOthersAlone() {
        var router = Self.router(connections: ["a"])
        router.append(Self.record("m1"))
        router.append(Self.record("n1", sender: "222"))
        _ = router.dispatch(sender: "111", window: 5, now: 0)
        _ = router.claimUpstreamID("m1", for: UpstreamHolder(sender: "111", token: "t"), limit: 5)
        _ = router.claimUpstreamID("n1", for: UpstreamHolder(sender: "222", token: "t"), limit: 5)
        router.forget(sender: "111")
        #expect(router.connections["a"]!.inFlight.isEmpty)
        #expect(router.upstreamIDs.keys.map(\.sender) == ["222"] && router.pending["222"]?.count == 1)
    }

    @Test func trimDropsTheOldestPastTheLimit() {
        var router = OutboundRouter()
        for i in 1...4 { router.append(Self.record("m\(i)")) }
        #expect(router.trim(sender: "111", to: 2).map(\.messageID) == ["m1", "m2"])
        #expect(router.pending["111"]?.map(\.messageID) == ["m3", "m4"])
    }
}
