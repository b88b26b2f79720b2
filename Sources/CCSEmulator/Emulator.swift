import APNsGateway
import APNsProviderAPI
import CCSEngine
import CCSProtocol
import PushDomain
import StoreModel
import SQLiteStore
import PostgresStore
import ConnectProxy
import Dashboard
import Foundation
import FCMHTTP
import HTTPAPI
import Hummingbird
import HummingbirdCore
import Logging
import MessageJournal
import NIOCore
import NIOPosix
import NIOSSL
import ServiceLifecycle
import Locking
import WebPushDelivery
import WebPushService
import XMPPServer

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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

/// One running emulator: the store, the engine and every listener.
public final class Emulator: Sendable {
    public let engine: Engine
    public let info: EmulatorInfo
    let group: MultiThreadedEventLoopGroup
    let channels: [any Channel]
    let httpTask: Task<Void, any Error>
    let http: ServiceGroup
    /// Bound ports of the optional listeners (nil when not asked for).
    public let httpsPort: Int?
    public let proxyPort: Int?
    let ticker: RepeatedTask
    let apns: APNsServer
    let apnsHTTP2: ProviderServer
    let logger: Logger
    /// Held while this emulator exists; released when it is deallocated (or the process ends).
    let dataDirectoryLock: DataDirectoryLock
    let exportOnExitDirectory: String?
    let webPush: WebPushDelivery?

    private init(engine: Engine, info: EmulatorInfo, group: MultiThreadedEventLoopGroup, channels: [any Channel],
                 http: ServiceGroup, httpTask: Task<Void, any Error>, httpsPort: Int?, proxyPort: Int?,
                 apns: APNsServer, apnsHTTP2: ProviderServer, logger: Logger, dataDirectoryLock: DataDirectoryLock, exportOnExitDirectory: String?,
                 webPush: WebPushDelivery?) {
        self.webPush = webPush
        self.exportOnExitDirectory = exportOnExitDirectory
        self.apns = apns
        self.apnsHTTP2 = apnsHTTP2
        self.dataDirectoryLock = dataDirectoryLock
        self.httpsPort = httpsPort
        self.proxyPort = proxyPort
        self.engine = engine
        self.http = http
        // Expiry and ACK timeouts: once a second on the wall clock (the virtual clock also ticks on advance).
        let trimmer = MemoryTrimmer()
        self.ticker = group.next().scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { _ in
            engine.tick()
            trimmer.tick()
        }
        self.info = info
        self.group = group
        self.channels = channels
        self.httpTask = httpTask
        self.logger = logger
    }

    /// Opens the store, binds every listener, and returns once all of them accept connections.
    public static func start(_ config: EmulatorConfiguration, logger: Logger) async throws -> Emulator {
        try checkExposure(config)
        let fm = FileManager.default
        let dataDir = URL(fileURLWithPath: config.dataDirectory, relativeTo: URL(fileURLWithPath: fm.currentDirectoryPath))
            .standardizedFileURL.path
        do {
            try fm.createDirectory(atPath: dataDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw ConfigurationError("cannot create --data-dir \(dataDir): \(error.localizedDescription)")
        }
        try DataDirectoryPermissions.secure(dataDir, logger: logger)
        // Before anything touches the store: a second server must not open (or reset) it.
        let lock = try DataDirectoryLock.acquire(dataDirectory: dataDir)
        if let problem = lock.problem {
            logger.warning("\(problem); a second server on this data dir would not be refused")
        }
        let postgresURL = try storeURL(config)
        if config.webPush && postgresURL != nil {
            throw ConfigurationError("--web-push on needs the embedded store: with --store every node would push the same messages")
        }
        if config.resetState {
            try resetState(in: dataDir, logger: logger)
        }

        var configuredSenders: [String: String] = [:]
        var projectSenders: [String: String] = [:]
        if let file = config.configFile {
            let senderFile = try SenderFile.load(from: file)
            if config.authMode == .strict && senderFile.senders.isEmpty {
                throw ConfigurationError(senderFile.noSendersExplanation) // names the unknown keys itself
            }
            for key in senderFile.unknownKeys {
                logger.warning("\(senderFile.unknownKeyWarning(key))")
            }
            configuredSenders = senderFile.senders
            projectSenders = senderFile.projects
        } else if config.authMode == .strict {
            throw ConfigurationError("--auth strict needs --config FILE listing at least one sender")
        }

        let store: any Persistence
        var cluster: PostgresCluster?
        if let postgresURL {
            do {
                let postgres = try PostgresStore(url: postgresURL, synchronousCommit: config.durability == .full, logger: logger)
                if config.resetState {
                    try postgres.removeEverything()
                    logger.notice("--reset-state: deleted the state in \(postgresURL) (every node's)")
                }
                store = postgres
                // Every node on the database is one service (docs/scaling.md); alone, a cluster of one.
                cluster = try PostgresCluster(store: postgres, logger: logger)
                logger.notice("state in \(postgresURL), node \(postgres.nodeID)")
            } catch let error as ConfigurationError {
                throw error
            } catch {
                throw ConfigurationError("--store \(postgresURL): \(String(reflecting: error))")
            }
        } else {
            store = try Store(path: dataDir + "/ccs-emulator.sqlite", durability: config.durability)
        }
        if let from = config.importDirectory {
            // Before anything reads the state: the engine, the clock and the fault rules start from it.
            let file = URL(fileURLWithPath: from).appendingPathComponent(StoreSnapshot.fileName).path
            let text: String
            do { text = try String(contentsOfFile: file, encoding: .utf8) } catch {
                throw ConfigurationError("--import \(from): cannot read \(file): \(error.localizedDescription)")
            }
            do { try store.importSnapshot(text) } catch {
                throw ConfigurationError("--import \(from): \(error)")
            }
            logger.notice("imported the state from \(file)")
        }
        let committer = GroupCommitter(store: store, cancellableDelay: .milliseconds(config.liveWriteDelayMillis))
        let clock: any EngineClock
        switch config.clock {
        case .wall: clock = WallClock()
        case .virtual:
            if let saved = try store.meta(VirtualClock.metaKey).flatMap({ Int64($0) }) {
                clock = VirtualClock(startMillis: saved)
            } else {
                // Saved at once: a crash before the first advance must not move the clock.
                let start = WallClock().nowMillis()
                try store.apply([.setMeta(key: VirtualClock.metaKey, value: String(start))])
                clock = VirtualClock(startMillis: start)
            }
        }
        var engineConfiguration = Engine.Configuration(authMode: config.authMode, configuredSenders: configuredSenders,
                                                       maxUnackedOutbound: config.maxUnackedOutbound,
                                                       ackTimeoutMillis: config.ackTimeoutMillis,
                                                       maxConnectionsPerSender: config.maxConnectionsPerSender)
        engineConfiguration.auditEnabled = config.audit
        engineConfiguration.deviceWindow = config.deviceWindow
        engineConfiguration.deviceMessageRate = config.deviceMessageRate
        engineConfiguration.projectMessageRate = config.projectMessageRate
        engineConfiguration.topicMessageRate = config.topicMessageRate
        engineConfiguration.collapsibleThrottle = config.collapsibleThrottle
        let journal = config.journal ? try openJournal(path: dataDir + "/journal.sqlite", config: config, logger: logger) : nil
        let prometheus = PrometheusMetrics()
        let engine = try Engine(committer: committer, clock: clock, configuration: engineConfiguration, journal: journal,
                                metrics: prometheus.engineMetrics, cluster: cluster, logger: logger)
        cluster?.start(events: engine)

        // TLS: the given certificate, or the development CA's.
        let certPath: String, keyPath: String, caPath: String
        if let c = config.tlsCertificatePath, let k = config.tlsKeyPath {
            (certPath, keyPath, caPath) = (c, k, c)
        } else if config.tlsCertificatePath != nil || config.tlsKeyPath != nil {
            throw ConfigurationError("--tls-cert and --tls-key go together")
        } else {
            let ca = try DevelopmentCA.ensure(in: dataDir + "/tls")
            (certPath, keyPath, caPath) = (ca.serverCertPath, ca.serverKeyPath, ca.caCertPath)
        }
        var tlsConfig = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certPath).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: keyPath, format: .pem)))
        tlsConfig.minimumTLSVersion = .tlsv12
        // A peer that never answers our close_notify must not hold a closed session for long.
        tlsConfig.shutdownTimeout = .seconds(1)
        let tls = try NIOSSLContext(configuration: tlsConfig)
        // APNs providers authenticate with client certificates from the development CA (apns-cert),
        // whichever certificate the server itself presents.
        let developmentCA = try DevelopmentCA.ensure(in: dataDir + "/tls")
        developmentCA.warnIfMadeBeforeItsConstraints(logger: logger)
        let apnsTLS = try APNsServer.TLS(configuration: APNsServer.tlsConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certPath),
            privateKey: try NIOSSLPrivateKey(file: keyPath, format: .pem),
            trustRoots: try NIOSSLCertificate.fromPEMFile(developmentCA.caCertPath),
            allowTLS1: config.apns.allowTLS1))
        let caPEM = (try? String(contentsOfFile: caPath, encoding: .utf8)) ?? ""

        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, config.eventLoopThreads))
        var channels: [any Channel] = []
        let mailboxes = LoopMailboxes(group: group)
        do {
            if let cluster {
                let wildcard = ["0.0.0.0", "::", "[::]"].contains(config.bindHost)
                let advertised = config.clusterHost ?? (wildcard ? ProcessInfo.processInfo.hostName : config.bindHost)
                do {
                    try cluster.openLinks(group: group, bind: config.bindHost, port: config.clusterPort, advertised: advertised,
                                          handshakeTimeout: .milliseconds(Int64(config.requestTimeoutMillis)))
                } catch {
                    throw ListenerError(error, option: "--cluster-port", port: config.clusterPort, host: config.bindHost)
                }
            }
            func bindCCS(port: Int, option: String) async throws -> any Channel {
                do {
                    let channel = try await XMPPListener.bind(group: group, host: config.bindHost, port: port, tls: tls,
                                                              role: .appServer, engine: engine, configuration: config.xmpp,
                                                              logger: logger, mailboxes: mailboxes)
                    channels.append(channel)
                    return channel
                } catch {
                    throw ListenerError(error, option: option, port: port, host: config.bindHost)
                }
            }
            let ccs = try await bindCCS(port: config.ccsPort, option: "--ccs-port")
            // Pre-production was the same service on another port: the same listener, again.
            var preprod: (any Channel)?
            if let port = config.ccsPreprodPort { preprod = try await bindCCS(port: port, option: "--ccs-preprod-port") }
            let device: any Channel
            // The device channel names the CCS port to an app server that logs in there by mistake.
            var deviceChannel = config.xmpp
            deviceChannel.appServerPort = ccs.localAddress?.port
            do {
                device = try await XMPPListener.bind(group: group, host: config.bindHost, port: config.devicePort,
                                                     tls: tls, role: .device, engine: engine,
                                                     configuration: deviceChannel, logger: logger, mailboxes: mailboxes)
            } catch {
                throw ListenerError(error, option: "--device-port", port: config.devicePort, host: config.bindHost)
            }
            channels.append(device)

            var apnsConfig = config.apns
            apnsConfig.host = config.bindHost
            apnsConfig.handshakeTimeout = .milliseconds(Int64(config.requestTimeoutMillis))
            let pendingGateway: APNsServer.PendingGateway
            do {
                pendingGateway = try await APNsServer.bindGateway(group: group, tls: apnsTLS, configuration: apnsConfig,
                                                                  engine: engine, logger: logger)
            } catch {
                throw ListenerError(error, option: "--apns-port", port: apnsConfig.gatewayPort, host: config.bindHost)
            }
            channels.append(pendingGateway.channel)
            let apns: APNsServer
            do {
                apns = try await pendingGateway.start(group: group, tls: apnsTLS, configuration: apnsConfig,
                                                      engine: engine, logger: logger)
            } catch {
                throw ListenerError(error, option: "--apns-feedback-port", port: apnsConfig.feedbackPort,
                                    host: config.bindHost)
            }
            channels.append(apns.feedback)
            let apnsHTTP2 = try await bindProviderAPI(config: config, group: group, certificatePath: certPath, keyPath: keyPath,
                                                      caPath: developmentCA.caCertPath, dataDir: dataDir, engine: engine,
                                                      logger: logger)
            channels.append(apnsHTTP2.channel)

            var emulatorInfo = EmulatorInfo(ccsPort: ccs.localAddress?.port ?? 0,
                                            devicePort: device.localAddress?.port ?? 0, httpPort: 0,
                                            caCertPath: caPath, caCertPEM: caPEM, dataDir: dataDir)
            emulatorInfo.apnsPort = apns.gatewayPort
            emulatorInfo.ccsPreprodPort = preprod?.localAddress?.port
            emulatorInfo.apnsFeedbackPort = apns.feedbackPort
            emulatorInfo.apnsHTTP2Port = apnsHTTP2.port
            var webPush: WebPushDelivery?
            if config.webPush {
                try FileManager.default.createDirectory(atPath: dataDir + "/tls", withIntermediateDirectories: true)
                let vapid = try VAPIDKey.ensure(at: dataDir + "/tls/vapid-key.pem")
                let roots: [NIOSSLCertificate]
                do { roots = try config.webPushCAPath.map { try NIOSSLCertificate.fromPEMFile($0) } ?? [] } catch {
                    throw ConfigurationError("--web-push-ca \(config.webPushCAPath ?? ""): not a PEM certificate file (\(error))")
                }
                webPush = WebPushDelivery(engine: engine, vapid: vapid, group: group, logger: logger, extraTrustRoots: roots)
                emulatorInfo.vapidPublicKey = vapid.publicKeyBase64URL
            }
            let ports = Locked(emulatorInfo)
            let router = Router()
            // The token first (a caller without it learns nothing more), then the Host, Origin and
            // Content-Type rules that keep web pages out even where no token is set.
            if let token = config.adminToken { router.add(middleware: AdminTokenMiddleware(token: token)) }
            router.add(middleware: AdminRequestGuard(policy: HostPolicy(bindHost: config.bindHost, publicHosts: config.publicHosts)))
            AdminAPI(engine: engine, info: { ports.withLock { $0 } }, connectionStatistics: {
                ["idle_parsers_released": XMPPListener.idleParsersReleased,
                 "http_deadline_closes": HTTPRequestDeadlines.closed.load(ordering: .relaxed)]
            }, metricsText: { prometheus.scrape(engine: engine) }).addRoutes(to: router)
            Dashboard.addRoutes(to: router)
            APNsKeyRoutes.add(to: router, dataDirectory: dataDir)
            // The FCM HTTP APIs (legacy send, OAuth2, v1) on the same port and the same engine.
            try FCMHTTPAPI(engine: engine, credentialsDirectory: dataDir + "/credentials",
                           projectSenders: projectSenders).addRoutes(to: router)
            if config.benchRoutes { BenchRoutes.add(to: router) }
            var httpLogger = logger
            httpLogger.logLevel = max(logger.logLevel, .notice)
            // One responder for every HTTP listener: plain, TLS, and the proxy's tunnels (which reach TLS).
            let responder = router.buildResponder()
            var apps: [any Service] = []
            var started: [(option: String, port: Int, ports: AsyncStream<Int>)] = []
            var continuations: [AsyncStream<Int>.Continuation] = []
            func addApplication(_ server: HTTPServerBuilder, option: String, port: Int) {
                let (portStream, portContinuation) = AsyncStream.makeStream(of: Int.self)
                apps.append(Application(
                    responder: responder, server: server,
                    configuration: .init(address: .hostname(config.bindHost, port: port), serverName: "ccs-emulator"),
                    onServerRunning: { channel in
                        portContinuation.yield(channel.localAddress?.port ?? 0)
                        portContinuation.finish()
                    },
                    // Not `group`: a process-wide group that is never shut down (SharedHTTPLoops says why).
                    eventLoopGroupProvider: .shared(SharedHTTPLoops.group(threads: config.eventLoopThreads)),
                    logger: httpLogger))
                started.append((option, port, portStream))
                continuations.append(portContinuation)
            }
            let requestTimeout = TimeAmount.milliseconds(Int64(config.requestTimeoutMillis))
            let http1Configuration = HTTP1Channel.Configuration(
                additionalChannelHandlers: [HTTPRequestDeadlines(timeout: requestTimeout)])
            // HTTP/1.1 and cleartext HTTP/2 (prior knowledge) on the plain port; the send routes on their
            // connection's event loop, the others on the global executor.
            let plain = HTTPServerBuilder {
                EventLoopHTTPChannel(base: CleartextHTTPChannel(requestTimeout: requestTimeout, streamConfiguration: http1Configuration,
                                                                responder: LoopRoutes.responder($0)))
            }
            addApplication(plain, option: "--http-port", port: config.httpPort)
            // Proxy mode tunnels HTTPS to a TLS listener: the --https-port one, or a private one on a free port.
            if config.httpsPort != nil || config.proxyPort != nil {
                let tlsConfiguration = tlsConfig
                let https = HTTPServerBuilder {
                    EventLoopHTTPChannel(base: try HTTPSChannel(
                        tlsConfiguration: tlsConfiguration, requestTimeout: requestTimeout,
                        streamConfiguration: http1Configuration, responder: LoopRoutes.responder($0)))
                }
                addApplication(https, option: "--https-port", port: config.httpsPort ?? 0)
            }
            // In a service group, so that shutdown is graceful (no cancellation of open connections).
            let http = ServiceGroup(configuration: .init(services: apps, logger: httpLogger))
            let waiting = continuations
            let httpTask = Task {
                do { try await http.run() } catch {
                    // A listener that could not bind ends the group; nobody may wait for its port.
                    for c in waiting { c.finish() }
                    throw error
                }
            }
            var bound: [Int] = []
            for entry in started {
                var port: Int?
                for await p in entry.ports { port = p }
                guard let port else {
                    if case .failure(let error) = await httpTask.result {
                        throw ListenerError(error, option: entry.option, port: entry.port, host: config.bindHost)
                    }
                    throw ConfigurationError("the HTTP listener (\(entry.option)) did not start")
                }
                bound.append(port)
            }
            let httpPort = bound[0]
            let tlsPort = bound.count > 1 ? bound[1] : nil

            var proxyPort: Int?
            if let requested = config.proxyPort, let tlsPort {
                let proxy: any Channel
                do {
                    proxy = try await ConnectProxyListener.bind(
                        group: group, host: config.bindHost, port: requested,
                        routes: try ProxyRoutes.routes(bindHost: config.bindHost, httpsPort: tlsPort,
                                                       ccsPort: ccs.localAddress?.port ?? 0,
                                                       ccsPreprodPort: preprod?.localAddress?.port,
                                                       apnsHTTP2Port: apnsHTTP2.port),
                        credentials: config.proxyCredentials, logger: logger)
                } catch {
                    await http.triggerGracefulShutdown()
                    _ = await httpTask.result
                    throw ListenerError(error, option: "--proxy-port", port: requested, host: config.bindHost)
                }
                channels.append(proxy)
                proxyPort = proxy.localAddress?.port
            }
            let info = ports.withLock { $0.httpPort = httpPort; return $0 }
            webPush?.start()
            return Emulator(engine: engine, info: info, group: group, channels: channels, http: http,
                            httpTask: httpTask, httpsPort: config.httpsPort == nil ? nil : tlsPort,
                            proxyPort: proxyPort, apns: apns, apnsHTTP2: apnsHTTP2, logger: logger, dataDirectoryLock: lock,
                            exportOnExitDirectory: config.exportOnExitDirectory, webPush: webPush)
        } catch {
            for c in channels { try? await c.close() }
            try? await group.shutdownGracefully()
            cluster?.stop()
            await committer.shutdown()
            (store as? PostgresStore)?.close()
            journal?.shutdown()
            throw error
        }
    }

    /// The journal, or, when its file cannot be read (a power cut with `synchronous = OFF` can do that),
    /// a new one, with the old file kept aside: a lost record must not stop the emulator.
    static func openJournal(path: String, config: EmulatorConfiguration, logger: Logger) throws -> MessageJournal {
        let open = {
            try MessageJournal(path: path, retention: config.journalRetention,
                               logger: { [logger] in logger.error("journal: \($0)") })
        }
        do {
            return try open()
        } catch {
            let aside = path + ".unreadable-\(Int(Date().timeIntervalSince1970))"
            logger.error("the message journal \(path) could not be opened (\(error)); starting a new one, the old one is kept as \(aside)")
            let fm = FileManager.default
            try fm.moveItem(atPath: path, toPath: aside)
            for suffix in ["-wal", "-shm"] where fm.fileExists(atPath: path + suffix) {
                try? fm.moveItem(atPath: path + suffix, toPath: aside + suffix)
            }
            return try open()
        }
    }

    /// The database files `--reset-state` deletes; DATA_DIR/tls (the CA clients trust) and the lock stay.
    static let databaseFiles = ["ccs-emulator.sqlite", "ccs-emulator.sqlite-wal", "ccs-emulator.sqlite-shm",
                                "journal.sqlite", "journal.sqlite-wal", "journal.sqlite-shm"]

    static func resetState(in dataDir: String, logger: Logger) throws {
        let fm = FileManager.default
        var removed: [String] = []
        for name in databaseFiles where fm.fileExists(atPath: dataDir + "/" + name) {
            do { try fm.removeItem(atPath: dataDir + "/" + name) } catch {
                throw ConfigurationError("--reset-state: cannot delete \(dataDir)/\(name): \(error.localizedDescription)")
            }
            removed.append(name)
        }
        logger.notice("--reset-state: \(removed.isEmpty ? "no state to delete" : "deleted " + removed.joined(separator: ", ")) in \(dataDir); kept tls/")
    }

    /// The ready line: one JSON object naming every bound port.
    public var readyLine: String {
        var w = JSONObjectWriter()
        w.add("event", "ready")
        w.add("ccs_port", info.ccsPort)
        if let port = info.ccsPreprodPort { w.add("ccs_preprod_port", port) }
        w.add("device_port", info.devicePort)
        w.add("http_port", info.httpPort)
        if let httpsPort { w.add("https_port", httpsPort) }
        if let proxyPort { w.add("proxy_port", proxyPort) }
        w.add("apns_port", info.apnsPort)
        w.add("apns_feedback_port", info.apnsFeedbackPort)
        w.add("apns_http2_port", info.apnsHTTP2Port)
        if let port = (engine.cluster as? PostgresCluster)?.linkPort { w.add("cluster_port", port) }
        w.add("ca_cert", info.caCertPath)
        w.add("data_dir", info.dataDir)
        return w.finished()
    }

    /// Graceful stop: CONNECTION_DRAINING to every app server, a short wait for answers in flight, then
    /// the listeners and connections close and the store commits whatever it still holds.
    public func shutdown(maxWait: Duration = .seconds(2)) async {
        ticker.cancel()
        // APNs first: each gateway connection learns the last identifier taken (status 10) while the
        // engine still takes what came before it.
        await apns.shutdown()
        await apnsHTTP2.shutdown()
        engine.drainAll()
        let deadline = ContinuousClock.now.advanced(by: maxWait)
        while ContinuousClock.now < deadline, engine.connections().contains(where: { $0.pending > 0 }) {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for c in channels { try? await c.close() }
        engine.closeAllConnections()
        await webPush?.shutdown()
        try? await Task.sleep(for: .milliseconds(100)) // lets the closing tags go out
        // Event streams never end by themselves: end them, or the graceful stop would wait forever.
        engine.journal?.endFollowers()
        await http.triggerGracefulShutdown()
        _ = await httpTask.result
        if let virtual = engine.clock as? VirtualClock {
            engine.committer.submit(.setMeta(key: VirtualClock.metaKey, value: String(virtual.nowMillis())))
        }
        // The other nodes take over this node's devices and items at once, instead of after its lease.
        engine.cluster?.stop()
        // The store first: its last completions still hop to the event loops.
        await engine.committer.shutdown()
        engine.journal?.shutdown()
        if let to = exportOnExitDirectory {
            do {
                let file = try StoreSnapshot.write(try engine.store.exportSnapshot(), toDirectory: to)
                logger.notice("exported the state to \(file)")
            } catch {
                logger.error("--export-on-exit \(to): \(error)")
            }
        }
        (engine.store as? PostgresStore)?.close()
        try? await group.shutdownGracefully()
    }
}


/// A listener that could not bind, told in terms of the option that chose its port.
struct ListenerError: Error, CustomStringConvertible {
    var description: String

    init(_ error: any Error, option: String, port: Int, host: String) {
        switch Self.errno(of: error) {
        case EADDRINUSE?:
            description = "\(option) \(port) on \(host) is already in use (another ccs-emulator?); "
                + "pass \(option) 0 to pick a free port, or another port"
        case EACCES?:
            description = "\(option) \(port) on \(host): permission denied (ports below 1024 need privileges); "
                + "pass \(option) 0 to pick a free port, or a port above 1023"
        case EADDRNOTAVAIL?:
            description = "--bind \(host) is not an address of this machine (\(option) \(port)); try --bind 127.0.0.1"
        default:
            description = "\(option) \(port) on \(host): \(error)"
        }
    }

    /// The errno behind a failed bind, however deep NIO or the HTTP server wrapped it.
    static func errno(of error: any Error) -> Int32? {
        if let io = error as? IOError { return io.errnoCode }
        // Wrapped errors still print their cause; match the system's own text as a last resort.
        let text = String(describing: error)
        for code in [EADDRINUSE, EACCES, EADDRNOTAVAIL] where text.contains(String(cString: strerror(code))) {
            return code
        }
        return nil
    }
}

/// 127.0.0.0/8, ::1 and localhost: the addresses only this machine reaches.
extension Emulator {
    /// What a configuration would open beyond this machine, refused before anything is bound
    /// (docs/hardening.md, "Threat model").
    static func checkExposure(_ config: EmulatorConfiguration) throws {
        if config.adminToken == nil, !isLoopback(config.bindHost) {
            throw ConfigurationError("--bind \(config.bindHost) would open the admin API (devices, faults, the clock, reset) beyond this machine: give --admin-token TOKEN (clients send Authorization: Bearer TOKEN; the device, send and bench commands read CCS_ADMIN_TOKEN), or bind 127.0.0.1")
        }
        if !isLoopback(config.bindHost), config.authMode != .strict, !config.openFCMAPIsWithoutAuth {
            throw ConfigurationError("--bind \(config.bindHost) would open the FCM APIs (CCS, /fcm/send, HTTP v1) to anyone on the network with any key: give --auth strict (with --config naming the senders and keys), or --open-fcm-apis-without-auth to accept that, or bind 127.0.0.1")
        }
        for name in config.publicHosts where !HostPolicy.isValidName(name) {
            throw ConfigurationError("--public-host \(name): give a host name or address as clients write it in Host (no scheme, port or path)")
        }
        if let token = config.adminToken, token.utf8.count < 16 || !token.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) {
            throw ConfigurationError("--admin-token must be at least 16 printable characters without spaces")
        }
    }

    /// `--store`'s URL, with the password from `--store-password-file` or PGPASSWORD when it has none.
    static func storeURL(_ config: EmulatorConfiguration) throws -> PostgresURL? {
        do {
            return try config.storeURL.map { text in
                var url = try PostgresURL(parsing: text)
                if url.password == nil { url.password = config.storePassword }
                return url
            }
        } catch {
            throw ConfigurationError("\(error)")
        }
    }
}

func isLoopback(_ host: String) -> Bool {
    host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
}
