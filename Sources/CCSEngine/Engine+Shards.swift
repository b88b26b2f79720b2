import DeliveryCore
import StoreModel
import Locking

/// Shards (docs/architecture.md, "Shards"): devices are partitioned over `shards` by their
/// installation token, each shard one `DeliveryCore` under its own lock, so that sends to devices on
/// different shards never wait for each other. What is per device lives in the device's shard alone:
/// its session, its rate, its throttle, its connection's link and early writes, and the message-id
/// clock that stamps its messages. What a send only reads about other devices (the registry, topics,
/// device groups, the senders) every shard holds a copy of, changed in all of them at once
/// (`everywhere`), so that a send reads it under its own shard's lock. The hub (`state`, shard 0)
/// alone holds the app-server side and the topics' rate: fan-outs are planned there.
///
/// Locks are taken one at a time, or all of them in shard order (`withEveryShard`); never one while
/// another is held.
extension Engine {
    /// More shards than this buy nothing (each holds a copy of the registry).
    public static let maximumShards = 64

    /// The shard holding the device whose installation token is `token`.
    func shard(_ token: String) -> Shard {
        shards.count == 1 ? state : shards[shardIndex(of: token)]
    }

    /// The index of the shard holding the device whose installation token is `token`.
    func shardIndex(of token: String) -> Int {
        var hasher = Hasher()
        hasher.combine(token)
        return Int(UInt(bitPattern: hasher.finalize()) % UInt(shards.count))
    }

    /// The shard of the installation `given` names (its first token, or one it was given later, whose
    /// installation may live in another shard), and `body`'s result there.
    func withDevice<R>(_ given: String, _ body: (inout State) -> R) -> R {
        if shards.count == 1 { return state.withLock { body(&$0) } }
        let first = shardIndex(of: given)
        var elsewhere: Int?
        let found = shards[first].withLock { s -> R? in
            if s.registry.devices[given] == nil, let installation = s.registry.aliases[given] {
                let index = shardIndex(of: installation)
                if index != first {
                    elsewhere = index
                    return nil
                }
            }
            return body(&s)
        }
        if let elsewhere { return shards[elsewhere].withLock { body(&$0) } }
        return found!
    }

    /// Runs `body` with every shard's lock held, taken in shard order (the hub first).
    func withEveryShard<T>(_ body: ([UnsafeMutablePointer<State>]) -> T) -> T {
        var result: T?
        var held: [UnsafeMutablePointer<State>] = []
        held.reserveCapacity(shards.count)
        lock(from: 0, &held) { result = body($0) }
        return result!
    }

    private func lock(from index: Int, _ held: inout [UnsafeMutablePointer<State>],
                      _ body: ([UnsafeMutablePointer<State>]) -> Void) {
        if index == shards.count { return body(held) }
        shards[index].withLock { s in
            withUnsafeMutablePointer(to: &s) { pointer in
                held.append(pointer)
                lock(from: index + 1, &held, body)
            }
        }
    }

    /// Makes a change of what every shard holds alike (the registry, topics, groups, senders) in each,
    /// in one step; returns the hub's result (each shard's is the same).
    @discardableResult
    func everywhere<R>(_ body: (inout State) -> R) -> R {
        if shards.count == 1 { return state.withLock { body(&$0) } }
        return withEveryShard { held in
            for pointer in held.dropFirst() { _ = body(&pointer.pointee) }
            return body(&held[0].pointee)
        }
    }

    /// Every shard's result of `body`, one shard at a time (a read of what each holds of its own).
    func eachShard<R>(_ body: (inout State) -> R) -> [R] {
        shards.map { $0.withLock { body(&$0) } }
    }

    /// Each shard's state at the start: the store's registry, topics and groups in every one, each
    /// with its own message-id slot; the app-server side in the hub.
    /// One shard: a delivery core and the host's tables for it, under their own lock.
    final class Shard: Sendable {
        private let state: Locked<State>

        init(_ initial: consuming sending State) { state = Locked(initial) }

        func withLock<R>(_ body: (inout sending State) -> sending R) -> sending R {
            state.withLock { body(&$0) }
        }
    }

    static func load(_ store: any Persistence, settings: DeliveryCore.Settings, configuration: Configuration,
                     shards: Int, clustered: Bool) throws -> [State] {
        let senders = try store.loadSenders()
        let devices = try store.loadDevices()
        let subscriptions = try store.loadSubscriptions()
        let groups = DeviceGroupRegistry(try store.loadDeviceGroups())
        let lastMicros = try store.largestMessageMicros()
        var states: [State] = []
        for index in 0..<shards {
            var shardSettings = settings
            shardSettings.messageIDSlot = settings.messageIDSlot.shard(index, of: shards)
            var s = State(core: DeliveryCore(
                settings: shardSettings,
                deviceRate: configuration.deviceMessageRate, topicRate: configuration.topicMessageRate,
                throttle: configuration.collapsibleThrottle, lastMicros: lastMicros))
            s.registry.replaceSenders(senders)
            for device in devices {
                s.registry.add(device)  // newest last: its APNs token wins
            }
            for t in subscriptions {
                s.topics.add(.init(senderID: t.senderID, name: t.topic), token: t.token, at: t.addedAt)
            }
            s.groups = groups
            states.append(s)
        }
        // In a cluster, upstream messages and receipts are taken from the store when an app server
        // connects (`ClusterCoordinator.claimOutbound`): another node may be sending them now.
        for record in clustered ? [] : try store.loadOutbound() {
            states[0].outbound.append(record)
            if record.kind == .upstream {
                _ = states[0].outbound.claimUpstreamID(record.messageID, for: UpstreamHolder(sender: record.senderID, token: record.token),
                                                       limit: .max)
            }
        }
        return states
    }
}
