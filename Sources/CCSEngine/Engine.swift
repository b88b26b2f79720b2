import AppServerAudit
import CCSProtocol
import CCSStore
import DequeModule
import FaultInjection
import Locking
import Logging
import MessageJournal

public enum AuthMode: String, Sendable, CaseIterable {
    /// Any all-digits sender ID with any non-empty key is accepted and provisioned.
    case permissive
    /// Only sender IDs and keys from the configuration file.
    case strict
}

/// Why a device-management command (register, change state, uninstall, reinstall, tap, reset) was
/// refused; the admin API answers each with its HTTP status.
public enum DeviceManagementError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidRequest(String)
    case unknownSender(String)
    case unknownDevice(String)
    case storeFailure(String)

    public var description: String {
        switch self {
        case .invalidRequest(let s): return s
        case .unknownSender(let s): return "sender \(s) is not configured (strict auth mode)"
        case .unknownDevice(let s): return "no device with token \(s)"
        case .storeFailure(let s): return "could not store the change: \(s)"
        }
    }
}

/// The domain: senders, devices, their queues, app-server connections, upstream traffic and receipts.
///
/// It knows nothing of sockets: connections reach it through calls, and it reaches them through
/// `DeviceLink` / `AppServerLink`, always outside its lock. Every state change that must survive a
/// crash goes through the `GroupCommitter`; answers that promise durability (ACKs to app servers,
/// `sent` to devices) are given only from its completions. Time comes from `clock` alone.
public final class Engine: Sendable {
    public struct Configuration: Sendable {
        public var authMode: AuthMode
        /// sender ID → server key, from the configuration file.
        public var configuredSenders: [String: String]
        public var maxSendersPerDevice: Int
        /// Distinct collapse keys stored per device and app (FCM: 4).
        public var maxCollapseKeys: Int
        /// Non-collapsible messages stored per device and app (FCM: 100).
        public var maxStoredNonCollapsible: Int
        /// Unacknowledged upstream messages and receipts per app-server connection.
        public var maxUnackedOutbound: Int
        /// Unacknowledged outbound messages are sent again after this long.
        public var ackTimeoutMillis: Int64
        /// Upstream messages a device may have waiting for app servers.
        public var maxPendingUpstreamPerDevice: Int
        /// Parallel app-server connections per sender ID (GCM: 1000).
        public var maxConnectionsPerSender: Int
        /// Upstream messages and receipts kept per sender while no app server takes them; beyond it the
        /// oldest are dropped, so that an app server that never ACKs cannot grow memory without bound.
        public var maxPendingOutboundPerSender: Int
        /// Whether the app-server audit records anything (docs/conformance.md).
        public var auditEnabled = true
        /// FCM's per-device message rate limit; nil: none (the default, so that load tests are not throttled).
        public var deviceMessageRate: MessageRate? = nil
        /// FCM's per-project quota for HTTP v1 (kept by the v1 front end, which meters it); nil: none.
        public var projectMessageRate: MessageRate? = nil
        /// A limit on the messages one sender sends to one topic; nil: none (the default).
        public var topicMessageRate: MessageRate? = nil

        public init(authMode: AuthMode = .permissive, configuredSenders: [String: String] = [:],
                    maxSendersPerDevice: Int = 100, maxCollapseKeys: Int = 4, maxStoredNonCollapsible: Int = 100,
                    maxUnackedOutbound: Int = 100, ackTimeoutMillis: Int64 = 60_000,
                    maxPendingUpstreamPerDevice: Int = 1000, maxConnectionsPerSender: Int = 1000,
                    maxPendingOutboundPerSender: Int = 100_000) {
            self.authMode = authMode
            self.configuredSenders = configuredSenders
            self.maxSendersPerDevice = maxSendersPerDevice
            self.maxCollapseKeys = maxCollapseKeys
            self.maxStoredNonCollapsible = maxStoredNonCollapsible
            self.maxUnackedOutbound = maxUnackedOutbound
            self.ackTimeoutMillis = ackTimeoutMillis
            self.maxPendingUpstreamPerDevice = maxPendingUpstreamPerDevice
            self.maxConnectionsPerSender = maxConnectionsPerSender
            self.maxPendingOutboundPerSender = maxPendingOutboundPerSender
        }
    }

    /// Everything the engine knows, under its one lock: each component has one job and its own
    /// file; an operation that spans them (a hand-over reads the registry and changes a session and
    /// the queue's write in one step) sees them all at once. docs/architecture.md says why one lock.
    struct State {
        /// Who exists: senders, device registrations and each device's state.
        var registry = Registry()
        /// Which devices are connected, what each holds unconfirmed, what other nodes offered.
        var sessions = DeviceSessions()
        /// Upstream messages and receipts on their way to app-server connections.
        var outbound = OutboundRouter()
        var topics = TopicRegistry()
        var groups = DeviceGroupRegistry()
        /// Messages counted against each device's rate limit (nil: `--device-message-rate` is off).
        var deviceRates: RateLimiter? = nil
        /// Messages counted against each sender's topics (nil: `--topic-message-rate` is off).
        var topicRates: RateLimiter? = nil
        /// The newest message timestamp given out (`nextMicros`): ids stay ordered when the clock is not.
        var lastMicros: Int64 = 0
    }

    public let configuration: Configuration
    public let clock: any EngineClock
    public let committer: GroupCommitter
    /// The APNs gateway's accepted, rejected and delivered notifications (admin API).
    public let apnsActivity = APNsActivity()
    /// The fault rules in force (durable: kept in the store's meta table) and the log of faults applied.
    public let faults: FaultInjector
    /// What app servers do and which client obligations they keep (docs/conformance.md).
    public let audit: Auditor
    /// Every message's life as events (nil: `--journal off`).
    public let journal: MessageJournal?
    /// Counters and histograms for `/metrics` (nil: not counted).
    public let metrics: EngineMetrics?
    public var store: any Persistence { committer.store }
    /// The other nodes on a shared store (docs/scaling.md); nil: this node is the whole service.
    public let cluster: (any ClusterCoordinator)?
    let logger: Logger
    let state: Locked<State>
    /// Told of every new registration once it is stored (Web Push delivery links new web devices).
    let registrationObservers = Locked<[RegistrationObserver]>([])
    struct RegistrationObserver: Sendable {
        let call: @Sendable (DeviceRecord) -> Void
    }
    /// Messages the store dropped as they arrived (the 100-message limit): their commit is no `stored`.
    let droppedOnArrival = Locked<Set<String>>([])
    /// Removals of a transaction, journaled after its completions: a message written and dropped in
    /// one transaction then reads `stored`, `accepted`, `discarded`, in that order.
    let removalsToJournal = Locked<[QueueRemoval]>([])

    public init(committer: GroupCommitter, clock: any EngineClock, configuration: Configuration,
                journal: MessageJournal? = nil, metrics: EngineMetrics? = nil, cluster: (any ClusterCoordinator)? = nil,
                logger: Logger = Logger(label: "ccs.engine")) throws {
        self.committer = committer
        self.cluster = cluster
        self.journal = journal
        self.metrics = metrics
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
        var rules: [FaultRule] = []
        if let stored = try committer.store.meta(Self.faultRulesMetaKey) {
            do {
                rules = try FaultInjector.decode(stored)
            } catch {
                logger.error("the stored fault rules could not be read; starting without them", metadata: ["error": "\(error)"])
            }
        }
        faults = FaultInjector(rules: rules, now: { clock.nowMillis() }, onFault: { entry in
            Self.journalFault(entry, journal: journal, now: clock.nowMillis())
            logger.info("fault injected", metadata: ["rule": "\(entry.ruleID)", "action": "\(entry.action)",
                                                     "origin": "\(entry.subject.origin)",
                                                     "message_id": "\(entry.subject.messageID ?? "-")",
                                                     "token": "\(entry.subject.token ?? "-")"])
        })
        audit = Auditor(enabled: configuration.auditEnabled, now: { clock.nowMillis() })
        var s = State()
        for sender in try committer.store.loadSenders() { s.registry.senders[sender.senderID] = sender }
        for device in try committer.store.loadDevices() {
            s.registry.add(device)  // newest last: its APNs token wins
        }
        for t in try committer.store.loadSubscriptions() {
            s.topics.add(.init(senderID: t.senderID, name: t.topic), token: t.token, at: t.addedAt)
        }
        s.groups = DeviceGroupRegistry(try committer.store.loadDeviceGroups())
        s.lastMicros = try committer.store.largestMessageMicros()
        s.deviceRates = configuration.deviceMessageRate.map(RateLimiter.init(rate:))
        s.topicRates = configuration.topicMessageRate.map(RateLimiter.init(rate:))
        // In a cluster, upstream messages and receipts are taken from the store when an app server
        // connects (`ClusterCoordinator.claimOutbound`): another node may be sending them now.
        for record in cluster == nil ? try committer.store.loadOutbound() : [] {
            s.outbound.append(record)
            if record.kind == .upstream {
                s.outbound.upstreamIDs[UpstreamHolder(sender: record.senderID, token: record.token), default: []].insert(record.messageID)
            }
        }
        state = Locked(s)
        connectJournal()
        if let metrics {
            committer.observeBatches { ops, nanoseconds in
                metrics.commitDuration.recordNanoseconds(Int64(nanoseconds))
                metrics.batchSize.record(ops)
            }
        }
    }
    func nextMicros(_ s: inout State) -> Int64 {
        let micros = max(clock.nowMicros(), s.lastMicros + 1)
        s.lastMicros = micros
        return micros
    }
    // MARK: effects outside the lock

    enum Send {
        /// Rendered for the device's platform (and its app's state then) on the way out, outside the lock.
        case device(any DeviceLink, [DeviceDelivery], Platform, app: String, appInBackground: Bool)
        case appServer(any AppServerLink, [OutboundMessage])
    }

    func perform(_ sends: [Send]) {
        for send in sends {
            switch send {
            case .device(let link, var deliveries, let platform, let app, let background):
                for d in deliveries { journal(.handedOver, d.message) }
                metrics?.delivered(deliveries.count, platform: platform)
                if link.wantsPlatformViews {
                    for i in deliveries.indices {
                        deliveries[i].view = Self.platformView(of: deliveries[i].message, platform: platform, app: app,
                                                               appInBackground: background)
                    }
                }
                link.deliver(deliveries)
            case .appServer(let link, let messages): link.sendOutbound(messages)
            }
        }
    }

}

extension String {
    var trimmingWhitespace: String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}
