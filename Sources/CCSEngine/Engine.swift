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

    struct InFlightDownstream {
        var message: QueuedMessage
        var toTray: Bool
        /// Handed over before it was committed: its write may still be called off, and then the
        /// app server's ACK comes from the device's confirmation instead of the commit.
        var early: EarlyDelivery? = nil
        /// Offered by this node (its id) before it was written there: the device's confirmation goes
        /// back to it, and this node removes nothing. Nil once the message is known written (its
        /// commit was announced, or it was read from the store).
        var offeredBy: String? = nil
    }

    struct EarlyDelivery {
        let ticket: WriteTicket
        let settle: @Sendable (SendResult) -> Void
    }

    struct OnlineDevice {
        let link: any DeviceLink
        /// The device's platform (fixed for a registration), kept here for the hand-over path.
        var platform: Platform?
        /// False until the queue as of connection time has been read and handed over.
        var loaded = false
        /// Written to this connection and not yet ACKed by the device.
        var inFlight: [String: InFlightDownstream] = [:]
        /// The newest messages the device ACKed on this connection: a queue read before their removal
        /// commits, or another node's announcement of one, must not hand them over again.
        var confirmed = RecentIDs(capacity: Engine.confirmationsKept)
        /// Of those, the ones offered by another node and confirmed back to it: if their write is
        /// announced after all, this node removes them.
        var confirmedOffers = RecentIDs(capacity: Engine.confirmationsKept)
        /// Whether the store may hold an APNs notification of this device that is not on this
        /// connection (Apple's store-and-forward collapse would have to remove it).
        var apnsStored = APNsStoredKnowledge.unknown
    }

    /// What this node knows of a connected device's stored APNs notifications (`Engine.needsCollapse`).
    enum APNsStoredKnowledge {
        /// Not yet: the queue as of connection time has not been read.
        case unknown
        /// The queue read at connection time held none, and none has been stored since.
        case holdsNone
        /// Some may be stored (read at connection, stored while connected): every newer one collapses.
        case mayHold
    }

    /// The newest `capacity` ids added, each with a value, oldest forgotten first (an id added again
    /// keeps its place).
    struct RecentMap<Value: Sendable>: Sendable {
        let capacity: Int
        private var order = Deque<String>()
        private var values: [String: Value] = [:]

        init(capacity: Int) { self.capacity = capacity }

        func contains(_ id: String) -> Bool { values[id] != nil }

        mutating func insert(_ id: String, _ value: Value) {
            guard values.updateValue(value, forKey: id) == nil else { return }
            order.append(id)
            if order.count > capacity, let oldest = order.popFirst() { values[oldest] = nil }
        }

        /// The value of `id` if it is here; it is forgotten.
        mutating func take(_ id: String) -> Value? { values.removeValue(forKey: id) }
    }

    /// Ids alone.
    typealias RecentIDs = RecentMap<Void>

    /// Confirmations remembered per connection (`OnlineDevice.confirmed`, `confirmedOffers`).
    static let confirmationsKept = 256

    struct SentOutbound {
        var record: OutboundRecord
        var sentAt: Int64
    }

    /// An outbound item is one device's: two devices may use the same upstream message id, and an
    /// app server may reuse a message id (and so a receipt id) for two devices.
    struct OutboundKey: Hashable {
        var kind: OutboundKind
        var token: String
        var messageID: String
    }

    /// A device's upstream messages to one sender.
    struct UpstreamHolder: Hashable {
        var sender: String
        var token: String
    }

    struct ConnectionEntry {
        var info: AppServerConnectionInfo
        let link: any AppServerLink
        /// Upstream messages and receipts written to this connection and not yet ACKed.
        var inFlight: [OutboundKey: SentOutbound] = [:]

        /// The in-flight item an app server's ACK of `messageID` (receipts with or without `dr2:`)
        /// means: the one from the device named by `to` when there is one, else the oldest with that id
        /// (a receipt's ACK carries no device; same-id receipts are then ACKed oldest first).
        func acknowledged(messageID: String, to: String?) -> OutboundKey? {
            if let to, inFlight[OutboundKey(kind: .upstream, token: to, messageID: messageID)] != nil {
                return OutboundKey(kind: .upstream, token: to, messageID: messageID)
            }
            let receiptID = DeliveryReceipt.messageIDPrefix + messageID
            var best: (key: OutboundKey, sent: SentOutbound)?
            for (key, sent) in inFlight where key.messageID == messageID || key.messageID == receiptID {
                if key.token == to { return key }
                if best == nil || (sent.sentAt, sent.record.createdAt) < (best!.sent.sentAt, best!.sent.record.createdAt) {
                    best = (key, sent)
                }
            }
            return best?.key
        }
    }

    struct State {
        var senders: [String: SenderRecord] = [:]
        var devices: [String: DeviceRecord] = [:]
        var deviceStates: [String: DeviceState] = [:]
        var tokenByDeviceID: [String: String] = [:]
        var online: [String: OnlineDevice] = [:]
        var connections: [String: ConnectionEntry] = [:]
        var connectionsBySender: [String: [String]] = [:]
        /// Outbound messages per sender not on any connection, oldest first.
        var outboundPending: [String: Deque<OutboundRecord>] = [:]
        /// Ids of the upstream messages each device has waiting for each sender (pending or sent and
        /// not ACKed): the duplicate and per-device limit checks look here, not through the queues.
        var upstreamIDs: [UpstreamHolder: Set<String>] = [:]
        var lastMicros: Int64 = 0
        var roundRobin = 0
        /// Tray entries being tapped ("token id"): a second tap of the same one finds nothing.
        var taps: Set<String> = []
        var topics = TopicRegistry()
        var groups = DeviceGroupRegistry()
        /// APNs device token → the registration token of its newest registration.
        var apnsTokens: [String: String] = [:]
        /// In a cluster: items given up to the other nodes whose release is not committed yet, and items
        /// ACKed here whose removal is not: the admin view shows the first and not the second.
        var outboundReleasing: [OutboundKey: OutboundRecord] = [:]
        var outboundRemoving: Set<OutboundKey> = []
        /// Upstream messages handed to an app server before their write was taken by the writer: an
        /// ACK that comes first calls the write off and answers the device (Engine+Outbound.swift).
        var liveUpstream: [OutboundKey: LiveUpstream] = [:]
        /// Messages offered to the device's node before their write (by device message id): its
        /// confirmation calls the write off and answers the sender (Engine+Cluster.swift).
        var offered: [String: Offered] = [:]
        /// Offered messages whose write committed before any confirmation came: a confirmation that
        /// comes later removes them (the newest `writtenOffersKept`).
        var writtenOffers = RecentMap<String>(capacity: Engine.writtenOffersKept)
        /// Messages counted against each device's rate limit (nil: `--device-message-rate` is off).
        var deviceRates: RateLimiter? = nil
        /// Messages counted against each sender's topics (nil: `--topic-message-rate` is off).
        var topicRates: RateLimiter? = nil
        /// A refreshed token → the token of its installation (the key of `devices`, queues and links).
        var aliases: [String: String] = [:]

        /// The installation `token` names: by its first token (its key, `DeviceRecord.token`) or by one
        /// it was given later. Nil for a token no installation has had.
        func installation(_ token: String) -> DeviceRecord? {
            if let device = devices[token] { return device }
            return aliases[token].flatMap { devices[$0] }
        }

        mutating func addAliases(of record: DeviceRecord) {
            for t in record.refreshedTokens { aliases[t] = record.token }
        }

        mutating func removeAliases(of record: DeviceRecord) {
            for t in record.refreshedTokens where aliases[t] == record.token { aliases[t] = nil }
        }
    }

    struct Offered {
        let message: QueuedMessage
        let early: EarlyDelivery
        /// Confirmed after the writer took its write: removed once that commits.
        var confirmed = false
    }

    /// Device message id → token of the newest offered messages that were written unconfirmed. Enough
    /// for the confirmations of several seconds at the highest rate measured (about 20,000 messages a
    /// second across nodes): a confirmation comes within the live-write delay plus a round trip, or its
    /// device has left and confirms nothing.
    static let writtenOffersKept = 65_536

    struct LiveUpstream {
        let ticket: WriteTicket
        let settle: @Sendable (UpstreamOutcome) -> Void
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
        for sender in try committer.store.loadSenders() { s.senders[sender.senderID] = sender }
        for device in try committer.store.loadDevices() {
            Self.add(device, &s)  // newest last: its APNs token wins
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
            s.outboundPending[record.senderID, default: []].append(record)
            if record.kind == .upstream {
                s.upstreamIDs[UpstreamHolder(sender: record.senderID, token: record.token), default: []].insert(record.messageID)
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

extension Engine.RecentMap where Value == Void {
    mutating func insert(_ id: String) { insert(id, ()) }
}
