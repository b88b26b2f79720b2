import Locking
import PushDomain
import Synchronization

/// A `Persistence` in memory, with the backends' rules (`InMemoryTables`): each `apply` is one
/// transaction, all or nothing. For tests of the engine and the committer that need neither SQLite
/// nor a database server, and for the store-semantics tests as a third backend; nothing survives
/// the process.
public final class InMemoryStore: Persistence {
    private let tables = Locked(InMemoryTables())
    private let failing = Locked<FailurePredicate?>(nil)
    private let removalObserver = Locked<RemovalObserver?>(nil)
    private let failingReads = Atomic<Bool>(false)

    /// In structs, as in the SQLite store: a bare function read back through `withLock` gains
    /// reabstraction thunks.
    private struct FailurePredicate: Sendable { let call: @Sendable (StoreOp) -> Bool }
    private struct RemovalObserver: Sendable { let call: @Sendable ([QueueRemoval]) -> Void }

    public init() {}

    public func apply(_ ops: [StoreOp]) throws {
        let failing = self.failing.withLock { $0 }?.call
        let removals = try tables.withLock { committed -> [QueueRemoval] in
            var t = committed
            var removals: [QueueRemoval] = []
            for op in ops {
                if let failing, failing(op) { throw InjectedStoreFailure() }
                try t.apply(op, removals: &removals)
            }
            committed = t
            return removals
        }
        report(removals)
    }

    public func applyIsolated(_ items: [[StoreOp]]) throws -> [Error?] {
        let failing = self.failing.withLock { $0 }?.call
        let (results, removals) = tables.withLock { committed -> ([Error?], [QueueRemoval]) in
            var results: [Error?] = []
            var removals: [QueueRemoval] = []
            for ops in items {
                var t = committed
                var itemRemovals: [QueueRemoval] = []
                do {
                    for op in ops {
                        if let failing, failing(op) { throw InjectedStoreFailure() }
                        try t.apply(op, removals: &itemRemovals)
                    }
                    committed = t
                    removals += itemRemovals
                    results.append(nil)
                } catch {
                    results.append(error)
                }
            }
            return (results, removals)
        }
        report(removals)
        return results
    }

    private func report(_ removals: [QueueRemoval]) {
        guard !removals.isEmpty, let observer = removalObserver.withLock({ $0 })?.call else { return }
        observer(removals)
    }

    private func read<T>(_ body: (InMemoryTables) throws -> T) throws -> T {
        if failingReads.load(ordering: .relaxed) { throw InjectedStoreFailure() }
        return try tables.withLock { try body($0) }
    }

    // MARK: reads

    public func loadSenders() throws -> [SenderRecord] { try read { Array($0.senders.values) } }

    public func loadDevices() throws -> [DeviceRecord] {
        try read { $0.devices.values.sorted { ($0.createdAt, $0.token) < ($1.createdAt, $1.token) } }
    }

    public func loadDeviceGroups() throws -> [DeviceGroupRecord] {
        try read { $0.groups.values.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) } }
    }

    public func device(token: String) throws -> DeviceRecord? { try read { $0.devices[token] } }
    public func sender(id: String) throws -> SenderRecord? { try read { $0.senders[id] } }
    public func deviceGroup(id: String) throws -> DeviceGroupRecord? { try read { $0.groups[id] } }

    public func subscriptions(token: String) throws -> [TopicSubscription] {
        try loadSubscriptions().filter { $0.token == token }
    }

    public func loadSubscriptions() throws -> [TopicSubscription] {
        try read { t in
            t.subscriptions.map { TopicSubscription(senderID: $0.key.senderID, topic: $0.key.topic, token: $0.key.token, addedAt: $0.value) }
        }
    }

    public func loadOutbound() throws -> [OutboundRecord] {
        try read { $0.outbound.values.sorted { $0.seq < $1.seq }.map(\.record) }
    }

    public func queuedMessages(token: String) throws -> [QueuedMessage] {
        try read { ($0.queues[token] ?? []).map(\.message) }
    }

    public func queueCounts() throws -> [String: Int] { try read { $0.queues.mapValues(\.count) } }

    /// The largest microsecond stamp in any stored device message id (`0:<micros>%…`).
    public func largestMessageMicros() throws -> Int64 {
        try read { t in
            let ids = t.queues.values.joined().map(\.message.deviceMessageID) + t.trays.values.joined().map(\.entry.deviceMessageID)
            return ids.compactMap(Self.micros).max() ?? 0
        }
    }

    static func micros(_ id: String) -> Int64? {
        guard id.hasPrefix("0:"), let end = id.firstIndex(of: "%") else { return nil }
        return Int64(id[id.index(id.startIndex, offsetBy: 2)..<end])
    }

    public func tray(token: String) throws -> [TrayEntry] {
        try read { ($0.trays[token] ?? []).sorted { ($0.entry.shownAt, $0.seq) < ($1.entry.shownAt, $1.seq) }.map(\.entry) }
    }

    public func apnsFeedback(bundleID: String) throws -> [APNsFeedbackRecord] {
        try read { t in
            (t.feedback[bundleID] ?? [:]).map { APNsFeedbackRecord(bundleID: bundleID, deviceToken: $0.key, timestamp: $0.value) }
                .sorted { ($0.timestamp, $0.deviceToken) < ($1.timestamp, $1.deviceToken) }
        }
    }

    public func meta(_ key: String) throws -> String? { try read { $0.meta[key] } }

    // MARK: export, faults, observers

    public func exportSnapshot() throws -> String {
        try read { StoreSnapshot.render(InMemorySnapshot.rows(of: $0), schema: StoreSchema.newest) }
    }

    public func importSnapshot(_ text: String) throws {
        let tables = try InMemorySnapshot.tables(from: StoreSnapshot.parse(text, schema: StoreSchema.newest))
        self.tables.withLock { $0 = tables }
    }

    public func observeRemovals(_ observer: (@Sendable ([QueueRemoval]) -> Void)?) {
        removalObserver.withLock { $0 = observer.map(RemovalObserver.init(call:)) }
    }

    public func injectFailures(_ predicate: (@Sendable (StoreOp) -> Bool)?) {
        failing.withLock { $0 = predicate.map(FailurePredicate.init(call:)) }
    }

    public func injectReadFailures(_ on: Bool) { failingReads.store(on, ordering: .relaxed) }
}
