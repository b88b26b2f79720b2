import DeliveryCore
import CCSEngine
import CCSProtocol
import PushDomain
import StoreModel
import Foundation
import Locking
import Synchronization

final class FakeDevice: DeviceLink {
    let delivered = Locked<[DeviceDelivery]>([])
    let closed = Atomic<Bool>(false)

    func deliver(_ messages: [DeviceDelivery]) { delivered.withLock { $0 += messages } }
    func close() { closed.store(true, ordering: .relaxed) }

    var ids: [String] { delivered.withLock { $0.map(\.message.deviceMessageID) } }
    var payloads: [JSONValue] { delivered.withLock { $0.compactMap { try? JSONValue.parse($0.message.payload) } } }
}

final class FakeAppServer: AppServerLink {
    let sent = Locked<[OutboundMessage]>([])
    let draining = Atomic<Bool>(false)

    func drain() { draining.store(true, ordering: .relaxed) }
    func sendOutbound(_ messages: [OutboundMessage]) { sent.withLock { $0 += messages } }
    func close() {}
    var pendingCount: Int { 0 }
    var isDraining: Bool { draining.load(ordering: .relaxed) }
    var ids: [String] { sent.withLock { $0.map(\.messageID) } }
}

/// An engine on an in-memory store (the SQL backends' rules without a database: their own tests in
/// SQLiteStoreTests hold every backend to the same rules) and a virtual clock. Its writer thread
/// stops with it.
final class Harness: Sendable {
    let engine: Engine
    let clock: VirtualClock

    deinit { engine.committer.shutdownBlocking() }

    init(configuration: Engine.Configuration = .init(), store: (any Persistence)? = nil, liveWriteDelay: Duration = .zero,
         cluster: (any ClusterCoordinator)? = nil, observers: [any DeliveryObserver] = []) throws {
        clock = VirtualClock(startMillis: 1_700_000_000_000)
        var configuration = configuration
        if configuration.shards == 1 { configuration.shards = Self.shards }
        engine = try Engine(committer: GroupCommitter(store: store ?? InMemoryStore(), cancellableDelay: liveWriteDelay),
                            clock: clock, configuration: configuration, cluster: cluster, observers: observers)
    }

    /// The engine's tests run on several shards, so that every path that crosses them is taken
    /// (`Engine.Configuration.shards`; `ShardTests` compares one shard with several).
    static let shards = 3

    /// A fresh store; pass it to two harnesses, one after the other, to test a restart (or at once,
    /// for two nodes on one shared store).
    static func newStore() -> any Persistence { InMemoryStore() }

    func register(senders: [String] = ["111"], app: String = "com.example.app") async throws -> DeviceRecord {
        try await engine.registerDevice(app: app, senders: senders, platform: .android)
    }

    func send(_ m: DownstreamMessage, from sender: String = "111") async -> Outcome {
        await withCheckedContinuation { cont in engine.downstream(m, senderID: sender) { cont.resume(returning: $0) } }
    }

    /// An upstream message, written as the device's JSON for brevity: the device channel reads it
    /// into the request (XMPPServer's `DeviceUpstream`, tested there); these tests set only the fields
    /// the engine takes.
    func upstream(_ token: String, _ json: JSONValue) async -> UpstreamOutcome {
        let request = UpstreamRequest(messageID: json["message_id"]?.stringValue ?? "", to: json["to"]?.stringValue ?? "",
                                      timeToLive: json["time_to_live"]?.intValue.map { Int($0) },
                                      data: (json["data"]?.objectValue ?? [:]).compactMapValues(\.stringValue))
        return await withCheckedContinuation { cont in
            engine.upstream(from: token, request) { cont.resume(returning: $0) }
        }
    }

    /// Waits until the store's writer thread has run everything submitted so far (twice: completions
    /// may submit more).
    func settle() async {
        for _ in 0..<3 {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                engine.committer.afterPendingWrites { c.resume() }
            }
        }
    }

    struct Timeout: Error {}

    /// Waits for `condition`, yielding between checks; throws after `seconds` (a bound, never a
    /// window the test relies on: the condition is a fact that follows without outside help).
    func waitUntil(seconds: Double = 10, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now.advanced(by: .seconds(seconds))
        while !condition() {
            if ContinuousClock.now > deadline { throw Timeout() }
            await Task.yield()
        }
    }

    func connect(_ token: String) async -> FakeDevice {
        let device = FakeDevice()
        engine.deviceConnected(token: token, link: device)
        await settle()
        return device
    }

    func appServer(_ sender: String = "111", id: String) -> FakeAppServer {
        let link = FakeAppServer()
        engine.connectionOpened(AppServerConnectionInfo(id: id, senderID: sender, remoteAddress: "test",
                                                        connectedAtMillis: 0), link: link)
        return link
    }

    func queue(_ token: String) throws -> [QueuedMessage] { try engine.store.queuedMessages(token: token) }
}

func data(_ id: String, to: String, _ extra: (inout DownstreamMessage) -> Void = { _ in }) -> DownstreamMessage {
    var m = DownstreamMessage(to: to, messageID: id, data: ["id": id])
    extra(&m)
    return m
}

/// A downstream message's answer in the tests' words: accepted for a token, or refused.
enum Outcome: Equatable {
    case ack(from: String)
    case nack(SendError)
    case group(GroupSendOutcome)
}

extension Engine {
    /// What the CCS front end does with a decoded message: one token (or topic/condition) target.
    func downstream(_ m: DownstreamMessage, senderID: String, completion: @escaping @Sendable (Outcome) -> Void) {
        send(SendRequest(sender: senderID, target: m.canonicalTarget, message: m.canonical)) { results in
            switch results[0] {
            case .accepted(let token, _, _): completion(.ack(from: token))
            case .fannedOut: completion(.ack(from: m.to ?? m.condition ?? ""))
            case .refused(let error): completion(.nack(error))
            case .group(let outcome): completion(.group(outcome))
            }
        }
    }
}

/// Two engines as two nodes of one service, without PostgreSQL: what one node would announce or
/// offer reaches the other by a direct call, and a test may hold offers back to order events.
final class FakeCluster: ClusterCoordinator {
    let nodeID: String
    /// The other node's engine, weakly (the engines hold their clusters: no cycle).
    let partner = Locked(Partner())
    struct Partner {
        weak var engine: (any ClusterEvents)?
    }
    let partnerNode: String
    /// The tokens connected to the partner node.
    let partnerHolds = Locked<Set<String>>([])
    let holdOffers = Atomic<Bool>(false)
    let heldOffers = Locked<[QueuedMessage]>([])
    let confirmations = Locked<[String]>([])
    /// False: confirmations are recorded but lost on the way (the link and NOTIFY both failed).
    let deliverConfirmations = Atomic<Bool>(true)
    /// The remainder of every id's microseconds this node mints (each node of a cluster has its own).
    let messageIDSlot: Int

    init(nodeID: String, partnerNode: String, messageIDSlot: Int = 0) {
        self.nodeID = nodeID
        self.partnerNode = partnerNode
        self.messageIDSlot = messageIDSlot
    }

    func start(events: any ClusterEvents) {}
    func stop() {}
    func deviceOnline(token: String, then: @escaping @Sendable () -> Void) { then() }
    func deviceOffline(token: String) {}
    func claimOutbound(senderID: String) {}
    func outboundHeldElsewhere() throws -> [OutboundRecord] { [] }
    func releaseOutbound(_ records: [OutboundRecord], then: @escaping @Sendable () -> Void) { then() }

    func node(holding token: String) -> String? {
        partnerHolds.withLock { $0.contains(token) } ? partnerNode : nil
    }

    func offerLive(_ message: QueuedMessage, to node: String) {
        if holdOffers.load(ordering: .relaxed) { return heldOffers.withLock { $0.append(message) } }
        partner.withLock { $0.engine }?.clusterLiveOffered([message], from: nodeID)
    }

    func releaseHeldOffers() {
        let held = heldOffers.withLock { h -> [QueuedMessage] in defer { h = [] }; return h }
        partner.withLock { $0.engine }?.clusterLiveOffered(held, from: nodeID)
    }

    func confirmLive(deviceMessageID: String, to node: String) {
        confirmations.withLock { $0.append(deviceMessageID) }
        guard deliverConfirmations.load(ordering: .relaxed) else { return }
        partner.withLock { $0.engine }?.clusterLiveConfirmed(deviceMessageIDs: [deviceMessageID])
    }
}
