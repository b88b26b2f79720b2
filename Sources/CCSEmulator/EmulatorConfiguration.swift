import DeliveryCore
import APNsGateway
import APNsProviderAPI
import CCSEngine
import ConnectProxy
import MessageJournal
import NIOCore
import SQLiteStore
import StoreModel
import XMPPServer

public enum ClockKind: String, Sendable, CaseIterable {
    case wall
    case virtual
}

public struct EmulatorConfiguration: Sendable {
    public var dataDirectory = ".ccs-emulator"
    public var bindHost = "127.0.0.1"
    public var ccsPort = 5235
    /// A second CCS listener, FCM's pre-production port 5236 (`--ccs-preprod-port`); nil: none.
    public var ccsPreprodPort: Int?
    public var devicePort = 5228
    public var httpPort = 8080
    /// The same HTTP routes over TLS (development-CA certificate); nil: not served.
    public var httpsPort: Int?
    /// Proxy mode: an HTTP CONNECT listener tunnelling to the Google hosts the emulator plays; nil: off.
    public var proxyPort: Int?
    /// What every CONNECT must carry in `Proxy-Authorization` (`--proxy-auth-file`); nil: none.
    public var proxyCredentials: ProxyCredentials?
    /// `POST /emulator/bench/noop`: a route that reads its body and answers `{}` without touching the
    /// engine, so that `bench http-v1` can measure the HTTP server's own ceiling in the same run.
    public var benchRoutes = false
    public var authMode: AuthMode = .permissive
    /// Path of the JSON configuration file (`{"senders":[{"sender_id":…,"server_key":…}]}`).
    public var configFile: String?
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?
    public var durability: Store.Durability = .full
    /// `--store`: a PostgreSQL URL (several nodes share one database: docs/scaling.md); nil keeps the
    /// state in SQLite in the data directory.
    public var storeURL: String?
    /// The PostgreSQL password when `storeURL` has none (`--store-password-file`, PGPASSWORD): a
    /// password on the command line is visible to every local user in `ps`.
    public var storePassword: String?
    /// With `storeURL`: where this node's link to the other nodes listens (`bindHost`, this port) and
    /// the host they reach it at (nil: `bindHost`, or the machine's host name for a wildcard bind).
    public var clusterPort = 0
    public var clusterHost: String?
    /// How long the write of a message already handed to an online device waits for that device's
    /// confirmation; a message confirmed in time is never written (docs/architecture.md).
    public var liveWriteDelayMillis = 20
    public var clock: ClockKind = .wall
    public var xmpp = XMPPServerConfiguration()
    /// Half the cores, at least one: a test server shares its machine with the app server and the
    /// devices under test, and one loop per core measured no faster on 2 cores while costing more CPU
    /// per message (cross-thread hand-offs, lock contention; docs/benchmarks.md).
    public var eventLoopThreads = max(1, System.coreCount / 2)
    /// The engine's shards (`Engine.Configuration.shards`); nil: one per event-loop thread, at most
    /// `Engine.maximumShards`.
    public var shards: Int?
    /// Upstream/receipt window per app-server connection, ACK timeout, connection cap per sender.
    public var maxUnackedOutbound = 100
    /// Messages handed to one device connection and not yet ACKed, at most (`--device-window`).
    public var deviceWindow = Engine.Configuration.defaultDeviceWindow
    public var ackTimeoutMillis: Int64 = 60_000
    public var maxConnectionsPerSender = 1000
    /// An HTTP client's time to send a request head, and again its body; also a TLS handshake on the
    /// APNs listeners (docs/hardening.md).
    public var requestTimeoutMillis = 30_000
    /// Required by `/emulator/v1/` routes as `Authorization: Bearer …` when set; without it a
    /// non-loopback `bindHost` is refused.
    public var adminToken: String?
    /// Names besides loopback and `bindHost` under which the admin API and the dashboard answer
    /// (`serve --public-host`): any other `Host` is refused, which stops DNS rebinding.
    public var publicHosts: [String] = []
    /// `serve --open-fcm-apis-without-auth`: with a non-loopback `bindHost`, accept permissive auth
    /// (any key) anyway. Without it, such a bind needs `--auth strict`.
    public var openFCMAPIsWithoutAuth = false
    /// The app-server audit (docs/conformance.md); off saves its bookkeeping under load tests.
    public var audit = true
    /// FCM's per-device message limit (`--device-message-rate`); nil: off.
    public var deviceMessageRate: MessageRate?
    /// HTTP v1's per-project quota (`--project-message-rate`); nil: off.
    public var projectMessageRate: MessageRate?
    /// A limit on one sender's messages to one topic (`serve --topic-message-rate`); nil: none.
    public var topicMessageRate: MessageRate?
    /// FCM's throttling of collapsible messages per device (`--collapsible-throttle`); nil: off.
    public var collapsibleThrottle: CollapsibleThrottleRate?
    /// Web Push delivery to web devices' push services (`--web-push on`); not with a shared store.
    public var webPush = false
    /// PEM certificates trusted for https push services besides the system's (`--web-push-ca`).
    public var webPushCAPath: String?
    /// The message journal (docs/admin-api.md#message-journal); off saves its writes under load tests.
    public var journal = true
    public var journalRetention = MessageJournal.Retention()
    /// Replace the state with this export directory's before starting (docs/export-format.md).
    public var importDirectory: String?
    /// Write an export of the state here at a graceful stop.
    public var exportOnExitDirectory: String?
    /// Delete the database (senders, devices, queues, the virtual clock's time) before opening it;
    /// the TLS material in DATA_DIR/tls stays, so clients keep trusting the same CA.
    public var resetState = false
    /// The APNs legacy binary gateway and feedback service (ports, payload limit, TLS 1.0).
    public var apns = APNsServer.Configuration()
    /// The APNs HTTP/2 provider API (`--apns-http2-port`; docs/apns.md).
    public var apnsHTTP2 = ProviderServer.Configuration()

    public init() {}
}

public struct ConfigurationError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
