/// What the engine needs of durable storage, and all it knows of it: batches of `StoreOp`s applied
/// atomically, and the reads it makes at start and for the admin views.
///
/// `Store` (SQLite through GRDB, WAL) is the embedded default; `PostgresStore` (PostgreSQL, for several
/// nodes on one database: docs/scaling.md) is the second. The engine and `GroupCommitter` see only this.
/// Every backend applies FCM's per-device queue rules (collapse, the 100-message limit, the
/// collapse-key limit) inside the transaction of the write that triggers them, as `Store` does.
public protocol Persistence: Sendable {
    /// Applies every op in one transaction: all or nothing.
    func apply(_ ops: [StoreOp]) throws
    /// Applies each item (a caller's ops) all or nothing in one transaction: an item that fails is
    /// rolled back alone and reported; the result holds one entry per item, nil for those committed.
    /// Throws only when the transaction as a whole fails.
    func applyIsolated(_ items: [[StoreOp]]) throws -> [Error?]

    func loadSenders() throws -> [SenderRecord]
    func loadDevices() throws -> [DeviceRecord]
    func loadDeviceGroups() throws -> [DeviceGroupRecord]
    /// One row each, for a node that learns another node changed it (nil: there is none).
    func device(token: String) throws -> DeviceRecord?
    func sender(id: String) throws -> SenderRecord?
    func deviceGroup(id: String) throws -> DeviceGroupRecord?
    func subscriptions(token: String) throws -> [TopicSubscription]
    /// Every topic subscription, for the engine's registry at start.
    func loadSubscriptions() throws -> [TopicSubscription]
    /// Every message waiting for an app server, oldest first.
    func loadOutbound() throws -> [OutboundRecord]
    /// The device's queue in arrival order.
    func queuedMessages(token: String) throws -> [QueuedMessage]
    /// Number of queued messages per token.
    func queueCounts() throws -> [String: Int]
    /// The largest microsecond stamp in any stored device message id.
    func largestMessageMicros() throws -> Int64
    func tray(token: String) throws -> [TrayEntry]
    /// The APNs feedback tuples of one app (bundle id), oldest first.
    func apnsFeedback(bundleID: String) throws -> [APNsFeedbackRecord]
    func meta(_ key: String) throws -> String?

    /// The whole state as an export's text (docs/export-format.md).
    func exportSnapshot() throws -> String
    /// Replaces the whole state with an export's, in one transaction (all or nothing).
    func importSnapshot(_ text: String) throws
    /// Who is told which queued messages were removed by collapse, the limits or expiry (the journal).
    func observeRemovals(_ observer: (@Sendable ([QueueRemoval]) -> Void)?)
    /// Fault injection: ops for which `apply` throws `InjectedStoreFailure` (nil: none).
    func injectFailures(_ predicate: (@Sendable (StoreOp) -> Bool)?)
    /// Fault injection: while true, every read throws `InjectedStoreFailure`.
    func injectReadFailures(_ on: Bool)
}

/// What `apply` throws for a message to a token the store has no device for.
public struct UnknownDevice: Error, CustomStringConvertible {
    public var token: String
    public init(token: String) { self.token = token }
    public var description: String { "no device with token \(token)" }
}

/// What `apply` throws for an op chosen by `injectFailures`.
public struct InjectedStoreFailure: Error, CustomStringConvertible {
    public init() {}
    public var description: String { "injected store failure" }
}
