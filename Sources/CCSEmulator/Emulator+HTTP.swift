import CCSEngine
import Dashboard
import FCMHTTP
import HTTPAPI
import Hummingbird
import HummingbirdCore
import Locking
import Logging
import NIOCore
import XMPPServer

/// The ports and keys `GET /emulator/v1/info` reports: the HTTP port joins once its server runs.
final class PublishedInfo: Sendable {
    private let state: Locked<EmulatorInfo>

    init(_ info: EmulatorInfo) { state = Locked(info) }

    var current: EmulatorInfo { state.withLock { $0 } }

    func setHTTPPort(_ port: Int) -> EmulatorInfo {
        state.withLock { $0.httpPort = port; return $0 }
    }
}

/// The HTTP side: one router (admin API, dashboard, FCM's HTTP APIs) and its servers, plain and TLS,
/// each a service of the emulator's group that binds when the group runs.
extension Emulator {
    static func makeRouter(_ config: EmulatorConfiguration, core: EmulatorCore, dataDir: String,
                           info: PublishedInfo) throws -> Router<BasicRequestContext> {
        let engine = core.engine, prometheus = core.prometheus
        let router = Router()
        // The token first (a caller without it learns nothing more), then the Host, Origin and
        // Content-Type rules that keep web pages out even where no token is set.
        if let token = config.adminToken { router.add(middleware: AdminTokenMiddleware(token: token)) }
        router.add(middleware: AdminRequestGuard(policy: HostPolicy(bindHost: config.bindHost, publicHosts: config.publicHosts)))
        AdminAPI(engine: engine, info: { info.current }, connectionStatistics: {
            ["idle_parsers_released": XMPPListener.idleParsersReleased,
             "http_deadline_closes": HTTPRequestDeadlines.closed.load(ordering: .relaxed)]
        }, metricsText: { prometheus.scrape(engine: engine) }).addRoutes(to: router)
        Dashboard.addRoutes(to: router)
        APNsKeyRoutes.add(to: router, dataDirectory: dataDir)
        // The FCM HTTP APIs (legacy send, OAuth2, v1) on the same port and the same engine.
        try FCMHTTPAPI(engine: engine, credentialsDirectory: dataDir + "/credentials",
                       projectSenders: core.projectSenders).addRoutes(to: router)
        if config.benchRoutes { BenchRoutes.add(to: router) }
        return router
    }

    /// The plain listener (HTTP/1.1 and prior-knowledge h2c) and, for `--https-port` or proxy mode
    /// (whose tunnels reach TLS), the TLS one: a private one on a free port when only the proxy needs it.
    static func addHTTPListeners(_ config: EmulatorConfiguration, router: Router<BasicRequestContext>, tls: TLSMaterial,
                                 logger: Logger, services: inout ServiceList) -> (plain: ListenerPort, tls: ListenerPort?) {
        var httpLogger = logger
        httpLogger.logLevel = max(logger.logLevel, .notice)
        // One responder for every HTTP listener: plain, TLS, and the proxy's tunnels (which reach TLS).
        let responder = router.buildResponder()
        func add(_ server: HTTPServerBuilder, option: String, port: Int) -> ListenerPort {
            let bound = ListenerPort()
            let application = Application(
                responder: responder, server: server,
                configuration: .init(address: .hostname(config.bindHost, port: port), serverName: "ccs-emulator"),
                onServerRunning: { bound.settle(.bound($0.localAddress?.port ?? 0)) },
                // Not the emulator's group: a process-wide one that is never shut down (SharedHTTPLoops says why).
                eventLoopGroupProvider: .shared(SharedHTTPLoops.group(threads: config.eventLoopThreads)),
                logger: httpLogger)
            services.add(option, .stopHTTP, HTTPListenerService(description: option, server: application, port: bound))
            return bound
        }
        let requestTimeout = TimeAmount.milliseconds(Int64(config.requestTimeoutMillis))
        let http1 = HTTP1Channel.Configuration(additionalChannelHandlers: [HTTPRequestDeadlines(timeout: requestTimeout)])
        // The send routes run on their connection's event loop, the others on the global executor.
        let plain = add(HTTPServerBuilder {
            EventLoopHTTPChannel(base: CleartextHTTPChannel(requestTimeout: requestTimeout, streamConfiguration: http1,
                                                            responder: LoopRoutes.responder($0)))
        }, option: "--http-port", port: config.httpPort)
        guard config.httpsPort != nil || config.proxyPort != nil else { return (plain, nil) }
        let serverTLS = tls.server
        let https = add(HTTPServerBuilder {
            EventLoopHTTPChannel(base: try HTTPSChannel(tlsConfiguration: serverTLS, requestTimeout: requestTimeout,
                                                        streamConfiguration: http1, responder: LoopRoutes.responder($0)))
        }, option: "--https-port", port: config.httpsPort ?? 0)
        return (plain, https)
    }
}
