import CCSEngine
import ConnectProxy
import HTTPAPI
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import PostgresStore
import PushDomain
import ServiceLifecycle
import WebPushDelivery
import XMPPServer

/// One running emulator: the store, the engine and every listener, each a service of one
/// `ServiceGroup` that stops them in the order `ShutdownPhase` declares.
public final class Emulator: Sendable {
    public let engine: Engine
    public let info: EmulatorInfo
    /// Bound ports of the optional listeners (nil when not asked for).
    public let httpsPort: Int?
    public let proxyPort: Int?
    let services: ServiceGroup
    let running: Task<Void, any Error>
    let settings: StopSettings
    let logger: Logger

    private init(engine: Engine, info: EmulatorInfo, httpsPort: Int?, proxyPort: Int?, services: ServiceGroup,
                 running: Task<Void, any Error>, settings: StopSettings, logger: Logger) {
        self.engine = engine
        self.info = info
        self.httpsPort = httpsPort
        self.proxyPort = proxyPort
        self.services = services
        self.running = running
        self.settings = settings
        self.logger = logger
    }

    /// What is opened and bound before the group runs.
    struct Prepared {
        let core: EmulatorCore
        let tls: TLSMaterial
        let group: MultiThreadedEventLoopGroup
        let router: Router<BasicRequestContext>
        let info: PublishedInfo
        let webPush: WebPushDelivery?
    }

    /// Opens the store, binds every listener, and returns once all of them accept connections. Whatever
    /// fails on the way, what was already opened is stopped through the same services, in the same order.
    public static func start(_ config: EmulatorConfiguration, logger: Logger) async throws -> Emulator {
        try checkExposure(config)
        let dataDir = try prepareDataDirectory(config, logger: logger)
        // Before anything touches the store: a second server must not open (or reset) it.
        let lock = try DataDirectoryLock.acquire(dataDirectory: dataDir)
        if let problem = lock.problem {
            logger.warning("\(problem); a second server on this data dir would not be refused")
        }
        var services = ServiceList()
        services.add("data-dir-lock", .releaseDataDirectory, StopOnShutdown("data-dir-lock") { lock.release() })
        let settings = StopSettings()
        let prepared: Prepared
        do {
            prepared = try await prepare(config, dataDir: dataDir, settings: settings, logger: logger, services: &services)
        } catch {
            await services.stopAll(logger: serviceLogger(logger))
            throw error
        }
        return try await launch(prepared, services: services, settings: settings, config: config, logger: logger)
    }

    /// The store, the engine, TLS, the event loops and the NIO listeners, each stop a service.
    static func prepare(_ config: EmulatorConfiguration, dataDir: String, settings: StopSettings, logger: Logger,
                        services: inout ServiceList) async throws -> Prepared {
        let core = try openCore(config, dataDir: dataDir, logger: logger, services: &services)
        addConnectionServices(core.engine, settings: settings, services: &services)
        addExportOnExit(config, engine: core.engine, settings: settings, logger: logger, services: &services)
        let tls = try TLSMaterial.load(config, dataDir: dataDir, logger: logger)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, config.eventLoopThreads))
        services.add("event-loops", .stopEventLoops, StopOnShutdown("event-loops") { try? await group.shutdownGracefully() })
        let listeners = try await bindListeners(config, core: core, tls: tls, dataDir: dataDir, group: group, logger: logger,
                                                services: &services)
        addTicker(core.engine, group: group, services: &services)
        let info = PublishedInfo(listeners.info)
        let router = try makeRouter(config, core: core, dataDir: dataDir, info: info)
        return Prepared(core: core, tls: tls, group: group, router: router, info: info, webPush: listeners.webPush)
    }

    /// Expiry and ACK timeouts: once a second on the wall clock (the virtual clock also ticks on advance).
    static func addTicker(_ engine: Engine, group: MultiThreadedEventLoopGroup, services: inout ServiceList) {
        let trimmer = MemoryTrimmer()
        let ticker = group.next().scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { _ in
            engine.tick()
            trimmer.tick()
        }
        services.add("tick", .stopTimers, StopOnShutdown("tick") { ticker.cancel() })
    }

    /// Runs the group (the HTTP servers bind now), waits for their ports, then binds the proxy, whose
    /// tunnels lead to the TLS server. A listener that fails stops the group, in the declared order.
    static func launch(_ prepared: Prepared, services: ServiceList, settings: StopSettings, config: EmulatorConfiguration,
                       logger: Logger) async throws -> Emulator {
        var services = services
        let http = addHTTPListeners(config, router: prepared.router, tls: prepared.tls, logger: logger, services: &services)
        let proxy = config.proxyPort.map { _ in LateListener("--proxy-port") }
        if let proxy { services.add("--proxy-port", .stopAccepting, proxy) }
        let group = services.makeGroup(logger: serviceLogger(logger))
        let running = Task { try await group.run() }
        do {
            let ports = try await httpPorts(http, config: config, running: running)
            let info = prepared.info.setHTTPPort(ports.plain)
            let tlsPort = ports.tls
            let proxyPort = try await bindProxy(config, into: proxy, tlsPort: tlsPort, info: info, group: prepared.group,
                                                logger: logger)
            settings.started = true
            prepared.webPush?.start()
            return Emulator(engine: prepared.core.engine, info: info, httpsPort: config.httpsPort == nil ? nil : tlsPort,
                            proxyPort: proxyPort, services: group, running: running, settings: settings, logger: logger)
        } catch {
            await group.triggerGracefulShutdown()
            _ = await running.result
            throw error
        }
    }

    /// The ports the HTTP servers bound, or why one did not bind. Every server's outcome is awaited
    /// first: when one fails, the group stops the other, which then reports that it stopped.
    static func httpPorts(_ http: (plain: ListenerPort, tls: ListenerPort?), config: EmulatorConfiguration,
                          running: Task<Void, any Error>) async throws -> (plain: Int, tls: Int?) {
        var listeners = [(option: "--http-port", port: http.plain, requested: config.httpPort)]
        if let tls = http.tls { listeners.append(("--https-port", tls, config.httpsPort ?? 0)) }
        var outcomes: [ListenerPort.Outcome] = []
        for listener in listeners { outcomes.append(await listener.port.outcome()) }
        var bound: [Int] = []
        for (listener, outcome) in zip(listeners, outcomes) {
            switch outcome {
            case .bound(let port): bound.append(port)
            case .failed(let error):
                throw ListenerError(error, option: listener.option, port: listener.requested, host: config.bindHost)
            case .stopped: continue
            }
        }
        guard bound.count == listeners.count else {
            // Stopped before binding: another service failed and stopped the group.
            if case .failure(let error) = await running.result { throw error }
            throw ConfigurationError("the HTTP listeners stopped before they started")
        }
        return (bound[0], bound.count > 1 ? bound[1] : nil)
    }

    /// Proxy mode's CONNECT listener (`--proxy-port`), on the emulator's event loops.
    static func bindProxy(_ config: EmulatorConfiguration, into proxy: LateListener?, tlsPort: Int?, info: EmulatorInfo,
                          group: MultiThreadedEventLoopGroup, logger: Logger) async throws -> Int? {
        guard let requested = config.proxyPort, let proxy, let tlsPort else { return nil }
        do {
            let channel = try await ConnectProxyListener.bind(
                group: group, host: config.bindHost, port: requested,
                routes: try ProxyRoutes.routes(bindHost: config.bindHost, httpsPort: tlsPort, ccsPort: info.ccsPort,
                                               ccsPreprodPort: info.ccsPreprodPort, apnsHTTP2Port: info.apnsHTTP2Port),
                credentials: config.proxyCredentials, logger: logger)
            await proxy.adopt(channel)
            return channel.localAddress?.port
        } catch {
            throw ListenerError(error, option: "--proxy-port", port: requested, host: config.bindHost)
        }
    }

    /// The service group's own log lines (a service starting, stopping) stay below notice.
    static func serviceLogger(_ logger: Logger) -> Logger {
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .notice)
        return quiet
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

    /// Graceful stop: every service stops in `ShutdownPhase`'s order (CONNECTION_DRAINING to every app
    /// server and up to `maxWait` for answers in flight, then the listeners and connections close and
    /// the store commits whatever it still holds).
    public func shutdown(maxWait: Duration = .seconds(2)) async {
        settings.maxWait = maxWait
        await services.triggerGracefulShutdown()
        if case .failure(let error) = await running.result {
            logger.error("stopping: \(error)")
        }
    }
}
