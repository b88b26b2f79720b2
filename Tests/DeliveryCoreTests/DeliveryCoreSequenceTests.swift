@testable import DeliveryCore
import PushDomain
import StoreModel
import Testing

/// The core under long seeded sequences of events (connections up and down, stale ones too, live and
/// stored messages, confirmations known and unknown, backlog reads): after every event its sessions
/// keep their invariants, and what it tells the host names only what it may.
@Suite struct DeliveryCoreSequenceTests {
    /// What the host would hold: the current connection per token and the early writes the core named.
    struct Host {
        var current: [String: DeviceConnectionID] = [:]
        var earlyWrites: Set<WriteID> = []
        var issues: [String] = []

        mutating func take(_ effects: [DeviceEffect], core: DeliveryCore) {
            for effect in effects {
                switch effect {
                case .deliver(let connection, let deliveries, _, _, _):
                    let token = deliveries.first?.message.token ?? ""
                    if current[token] != connection { issues.append("a hand-over to \(connection), not \(token)'s connection") }
                case .release(let connection, let writes, _):
                    if current.values.contains(connection) { issues.append("\(connection) released while current") }
                    for w in writes where earlyWrites.remove(w) == nil { issues.append("\(w) released twice or never named") }
                case .write, .throttled, .readBacklog: break
                }
            }
        }
    }

    static func check(_ core: DeliveryCore, _ host: Host, window: Int) -> [String] {
        var issues: [String] = []
        var named = Set<WriteID>()
        for (token, online) in core.sessions.online {
            if online.inFlight.count > window { issues.append("\(token) holds \(online.inFlight.count) > \(window)") }
            let plain = online.inFlight.values.filter { $0.message.kind == .message && $0.message.collapseKey == nil }.count
            if online.heldNonCollapsible != plain { issues.append("\(token) counts \(online.heldNonCollapsible), holds \(plain)") }
            if host.current[token] != online.connection { issues.append("\(token)'s connection is not the host's current one") }
            for entry in online.inFlight.values { if let w = entry.early?.write { named.insert(w) } }
        }
        if named != host.earlyWrites { issues.append("the core names \(named.count) early writes, the host keeps \(host.earlyWrites.count)") }
        return issues
    }

    @Test(arguments: [1, 2, 3, 42, 2026] as [UInt64])
    func invariantsHoldThroughASeededSequence(seed: UInt64) {
        let window = 3
        var core = DeliveryCore(settings: .init(deviceWindow: window, maxCollapseKeys: 4, maxStoredNonCollapsible: 100))
        let tokens = ["a", "b", "c"]
        for t in tokens {
            core.registry.add(DeviceRecord(token: t, deviceID: "d-" + t, secret: "s", app: "com.example", platform: .android,
                                           senders: ["111"], createdAt: 0))
        }
        var rng = SplitMix64(seed: seed)
        var host = Host()
        var nextConnection: UInt = 0, nextWrite: UInt64 = 0, nextMessage = 0
        let now: Int64 = 1_000_000
        for step in 0..<3000 {
            let token = tokens.randomElement(using: &rng)!
            switch Int.random(in: 0..<7, using: &rng) {
            case 0:
                nextConnection += 1
                let id = DeviceConnectionID(nextConnection)
                host.current[token] = id
                host.take(core.deviceConnected(token, connection: id), core: core)
            case 1:
                // Sometimes the current connection goes, sometimes an old one reports late.
                let id = Bool.random(using: &rng) ? host.current[token] ?? DeviceConnectionID(0) : DeviceConnectionID(UInt.random(in: 1...max(1, nextConnection), using: &rng))
                if host.current[token] == id { host.current[token] = nil }
                host.take(core.deviceDisconnected(token, connection: id), core: core)
            case 2:
                if let id = host.current[token], let effects = core.backlogRead([], token: token, connection: id, now: now) {
                    host.take(effects, core: core)
                }
            case 3, 4:
                nextMessage += 1
                let m = QueuedMessage(token: token, deviceMessageID: "m\(nextMessage)", senderID: "111", appMessageID: "a\(nextMessage)",
                                      collapseKey: Bool.random(using: &rng) ? "k\(nextMessage % 3)" : nil, priority: "high",
                                      timeToLive: 60, enqueuedAt: now, expiresAt: now + 60_000, deliveryReceiptRequested: false,
                                      delayWhileIdle: false, payload: "{}")
                nextWrite += 1
                let early = EarlyDelivery(write: WriteID(nextWrite))
                if case .live(let handOver, _, _) = core.submit(m, early: early, limits: nil, now: now) {
                    host.earlyWrites.insert(early.write)
                    host.take(handOver, core: core)
                }
            case 5:
                let held = core.sessions.online[token].map { Array($0.inFlight.keys) } ?? []
                let id = held.randomElement(using: &rng) ?? "unknown"
                if let c = core.confirm(id, token: token) {
                    if let w = c.entry.early?.write { host.earlyWrites.remove(w) }
                    core.remember(c, token: token, calledOff: c.mayCallOff != nil && Bool.random(using: &rng))
                }
            default:
                nextMessage += 1
                let stored = QueuedMessage(token: token, deviceMessageID: "s\(nextMessage)", senderID: "111", appMessageID: "s\(nextMessage)",
                                           collapseKey: nil, priority: "high", timeToLive: 60, enqueuedAt: now, expiresAt: now + 60_000,
                                           deliveryReceiptRequested: false, delayWhileIdle: false, payload: "{}")
                host.take(core.handOver([stored], to: token, now: now), core: core)
            }
            let issues = host.issues + Self.check(core, host, window: window)
            #expect(issues.isEmpty, "seed \(seed), step \(step): \(issues)")
            if !issues.isEmpty { return }
        }
    }
}
