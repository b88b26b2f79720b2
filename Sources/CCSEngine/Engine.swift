import DeliveryCore
import AppServerAudit
import PushDomain
import StoreModel
import DequeModule
import FaultInjection
import Locking
import Logging
import MessageJournal

/// The domain: senders, devices, their queues, app-server connections, upstream traffic and receipts.
///
/// It knows nothing of sockets: connections reach it through calls, and it reaches them through
/// `DeviceLink` / `AppServerLink`, always outside its lock. Every state change that must survive a
/// crash goes through the `GroupCommitter`; answers that promise durability (ACKs to app servers,
/// `sent` to devices) are given only from its completions. Time comes from `clock` alone.
public final class Engine: Sendable {
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
    /// The device message ids this node may mint: all of them alone, its slot's in a cluster.
    let messageIDSlot: MessageIDSlot
    /// What the delivery core was made with (`State.core`), for what the host builds outside the lock.
    let coreSettings: DeliveryCore.Settings
    let logger: Logger
    /// The hub: shard 0, which also holds the app-server side (the outbound router, the app servers'
    /// links and upstream writes) and the topics' rate (docs/architecture.md, "Shards").
    let state: Shard
    /// Every shard (`shards[0]` is `state`): each holds its devices' sessions, rates, throttle, links
    /// and early writes, and its own copy of the registry, topics and groups (Engine+Shards.swift).
    let shards: [Shard]
    /// Told of every new registration once it is stored (Web Push delivery links new web devices).
    let registrationObservers = Locked<[RegistrationObserver]>([])
    struct RegistrationObserver: Sendable {
        let call: @Sendable (DeviceRecord) -> Void
    }
    /// Who hears the engine's `DeliveryEvent`s: the journal and the metrics when on, then any given.
    let observers: [any DeliveryObserver]

    public init(committer: GroupCommitter, clock: any EngineClock, configuration: Configuration,
                journal: MessageJournal? = nil, metrics: EngineMetrics? = nil, cluster: (any ClusterCoordinator)? = nil,
                observers more: [any DeliveryObserver] = [], logger: Logger = Logger(label: "ccs.engine")) throws {
        self.committer = committer
        self.cluster = cluster
        messageIDSlot = cluster.map { MessageIDSlot(slot: $0.messageIDSlot % MessageIDSlot.count, of: MessageIDSlot.count) }
            ?? .whole
        self.journal = journal
        self.metrics = metrics
        let audit = Auditor(enabled: configuration.auditEnabled, now: { clock.nowMillis() })
        self.audit = audit
        let observers: [any DeliveryObserver] = (journal.map { [JournalObserver(journal: $0, now: { clock.nowMillis() })] } ?? [])
            + (metrics.map { [$0] } ?? []) + (audit.isEnabled ? [AuditObserver(auditor: audit)] : []) + more
        self.observers = observers
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
            for o in observers { o.observe(.faultApplied(entry)) }
            logger.info("fault injected", metadata: ["rule": "\(entry.ruleID)", "action": "\(entry.action)",
                                                     "origin": "\(entry.subject.origin)",
                                                     "message_id": "\(entry.subject.messageID ?? "-")",
                                                     "token": "\(entry.subject.token ?? "-")"])
        })
        coreSettings = DeliveryCore.Settings(
            deviceWindow: configuration.deviceWindow, maxCollapseKeys: configuration.maxCollapseKeys,
            maxStoredNonCollapsible: configuration.maxStoredNonCollapsible, clustered: cluster != nil,
            messageIDSlot: messageIDSlot)
        let loaded = try Self.load(committer.store, settings: coreSettings, configuration: configuration,
                                   shards: max(1, min(configuration.shards, Self.maximumShards)), clustered: cluster != nil)
        shards = loaded.map { Shard($0) }
        state = shards[0]
        connectObservers()
    }
    // MARK: effects outside the lock

    enum Send {
        /// Rendered for the device's platform (and its app's state then) on the way out, outside the lock.
        case device(any DeviceLink, [DeviceDelivery], Platform, app: String, appInBackground: Bool)
        case appServer(any AppServerLink, [OutboundMessage])
        /// Read the device's queue for this connection (`deliverBacklog`).
        case readBacklog(token: String, any DeviceLink)
        case close(any DeviceLink)
    }

    func perform(_ sends: [Send]) {
        for send in sends {
            switch send {
            case .device(let link, var deliveries, let platform, let app, let background):
                report(.handedOver(deliveries, platform))
                if link.wantsPlatformViews {
                    for i in deliveries.indices {
                        deliveries[i].view = DeliveryCore.platformView(of: deliveries[i].message, platform: platform, app: app,
                                                               appInBackground: background)
                    }
                }
                link.deliver(deliveries)
            case .appServer(let link, let messages): link.sendOutbound(messages)
            case .readBacklog(let token, let link): deliverBacklog(token: token, link: link)
            case .close(let link): link.close()
            }
        }
    }

}
