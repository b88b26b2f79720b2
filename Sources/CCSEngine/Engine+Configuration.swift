import DeliveryCore
extension Engine {
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
        /// The device channel's window: messages handed to one device connection and not yet ACKed,
        /// at most (`serve --device-window`). Past it, messages wait in the device's queue under the
        /// store's rules and go out as the device ACKs (docs/device-protocol.md).
        public var deviceWindow = Self.defaultDeviceWindow
        public static let defaultDeviceWindow = 100
        /// The range `serve --device-window` accepts.
        public static let deviceWindowRange = 1...10_000
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
        /// FCM's throttling of collapsible messages per device; nil: none (the default).
        public var collapsibleThrottle: CollapsibleThrottleRate? = nil
        /// The shards devices are partitioned over, each a delivery core under its own lock
        /// (`serve --shards`; the emulator's default is one per event loop). 1 … `Engine.maximumShards`.
        public var shards = 1

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

    /// What one shard knows, under its own lock (Engine+Shards.swift): the delivery core
    /// (`DeliveryCore`, a value with no I/O), the outbound router (used in the hub alone), and the
    /// host's tables of what the core names by id. An operation that spans components (a hand-over
    /// reads the registry and changes a session and the queue's write in one step) sees them all at
    /// once: a device's session and a copy of the registry are in the same shard.
    struct State {
        var core: DeliveryCore
        /// Upstream messages and receipts on their way to app-server connections.
        var outbound = OutboundRouter()
        // device host tables: the connections and early writes the core names by id.
        var deviceLinks = DeviceLinks()
        var earlyWrites: [WriteID: EarlyWrite] = [:]
        var lastWriteID: UInt64 = 0
        // app-server host tables
        /// The links of the router's connections (`outbound.connections`), by connection id: opened
        /// and closed with them (Engine+AppServers.swift).
        var appServers: [String: AppServerHost] = [:]
        /// The tickets and answers of the router's live upstream writes, by the id it gave each.
        var upstreamWrites: [UpstreamWriteID: LiveUpstream] = [:]

        init(core: DeliveryCore) { self.core = core }

        // The core's components, changed in place (`_modify`: a getter and setter would copy them).
        var registry: Registry {
            get { core.registry }
            _modify { yield &core.registry }
        }
        var sessions: DeviceSessions {
            get { core.sessions }
            _modify { yield &core.sessions }
        }
        var topics: TopicRegistry {
            get { core.topics }
            _modify { yield &core.topics }
        }
        var groups: DeviceGroupRegistry {
            get { core.groups }
            _modify { yield &core.groups }
        }
        var throttle: CollapsibleThrottle? {
            get { core.throttle }
            _modify { yield &core.throttle }
        }
        var topicRates: RateLimiter? {
            get { core.topicRates }
            _modify { yield &core.topicRates }
        }
    }
}
