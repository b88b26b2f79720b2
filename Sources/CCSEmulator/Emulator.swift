import CCSEngine
import CCSProtocol
import CCSStore
import Foundation
import HTTPAPI
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import ServiceLifecycle
import Synchronization
import XMPPServer

public enum ClockKind: String, Sendable, CaseIterable {
    case wall
    case virtual
}

public struct EmulatorConfiguration: Sendable {
    public var dataDirectory = ".ccs-emulator"
    public var bindHost = "127.0.0.1"
    public var ccsPort = 5235
    public var devicePort = 5228
    public var httpPort = 8080
    public var authMode: AuthMode = .permissive
    /// Path of the JSON configuration file (`{"senders":[{"sender_id":…,"server_key":…}]}`).
    public var configFile: String?
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?
    public var durability: Store.Durability = .full
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
    public var ackTimeoutMillis: Int64 = 60_000
    public var maxConnectionsPerSender = 1000

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
    let ticker: RepeatedTask
    let logger: Logger

    private init(engine: Engine, info: EmulatorInfo, group: MultiThreadedEventLoopGroup, channels: [any Channel],
                 http: ServiceGroup, httpTask: Task<Void, any Error>, logger: Logger) {
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
        let fm = FileManager.default
        let dataDir = URL(fileURLWithPath: config.dataDirectory, relativeTo: URL(fileURLWithPath: fm.currentDirectoryPath))
            .standardizedFileURL.path
        try fm.createDirectory(atPath: dataDir, withIntermediateDirectories: true)

        var configuredSenders: [String: String] = [:]
        if let file = config.configFile {
            configuredSenders = try loadSenders(from: file)
        }
        if config.authMode == .strict && configuredSenders.isEmpty {
            throw ConfigurationError("--auth strict needs --config FILE listing at least one sender")
        }

        let store = try Store(path: dataDir + "/ccs-emulator.sqlite", durability: config.durability)
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
        let engine = try Engine(committer: committer, clock: clock,
                                configuration: .init(authMode: config.authMode, configuredSenders: configuredSenders,
                                                      maxUnackedOutbound: config.maxUnackedOutbound,
                                                      ackTimeoutMillis: config.ackTimeoutMillis,
                                                      maxConnectionsPerSender: config.maxConnectionsPerSender),
                                logger: logger)

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
        let caPEM = (try? String(contentsOfFile: caPath, encoding: .utf8)) ?? ""

        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, config.eventLoopThreads))
        var channels: [any Channel] = []
        let mailboxes = LoopMailboxes(group: group)
        do {
            let ccs = try await XMPPListener.bind(group: group, host: config.bindHost, port: config.ccsPort, tls: tls,
                                                  role: .appServer, engine: engine, configuration: config.xmpp,
                                                  logger: logger, mailboxes: mailboxes)
            channels.append(ccs)
            let device = try await XMPPListener.bind(group: group, host: config.bindHost, port: config.devicePort,
                                                     tls: tls, role: .device, engine: engine,
                                                     configuration: config.xmpp, logger: logger, mailboxes: mailboxes)
            channels.append(device)

            let ports = Mutex(EmulatorInfo(ccsPort: ccs.localAddress?.port ?? 0,
                                           devicePort: device.localAddress?.port ?? 0, httpPort: 0,
                                           caCertPath: caPath, caCertPEM: caPEM, dataDir: dataDir))
            let router = Router()
            AdminAPI(engine: engine, info: { ports.withLock { $0 } }, connectionStatistics: {
                ["idle_parsers_released": XMPPListener.idleParsersReleased]
            }).addRoutes(to: router)
            let (portStream, portContinuation) = AsyncStream.makeStream(of: Int.self)
            var httpLogger = logger
            httpLogger.logLevel = max(logger.logLevel, .notice)
            let app = Application(
                router: router,
                configuration: .init(address: .hostname(config.bindHost, port: config.httpPort), serverName: "ccs-emulator"),
                onServerRunning: { channel in
                    portContinuation.yield(channel.localAddress?.port ?? 0)
                    portContinuation.finish()
                },
                eventLoopGroupProvider: .shared(group),
                logger: httpLogger)
            // In a service group, so that shutdown is graceful (no cancellation of open connections).
            let http = ServiceGroup(configuration: .init(services: [app], logger: httpLogger))
            let httpTask = Task {
                do { try await http.run() } catch {
                    portContinuation.finish()
                    throw error
                }
            }
            var httpPort: Int?
            for await p in portStream { httpPort = p }
            guard let httpPort else {
                _ = await httpTask.result
                if case .failure(let error) = await httpTask.result { throw error }
                throw ConfigurationError("the HTTP listener did not start")
            }
            let info = ports.withLock { $0.httpPort = httpPort; return $0 }
            return Emulator(engine: engine, info: info, group: group, channels: channels, http: http,
                            httpTask: httpTask, logger: logger)
        } catch {
            for c in channels { try? await c.close() }
            try? await group.shutdownGracefully()
            await committer.shutdown()
            throw error
        }
    }

    static func loadSenders(from file: String) throws -> [String: String] {
        let text: String
        do { text = try String(contentsOfFile: file, encoding: .utf8) } catch {
            throw ConfigurationError("cannot read --config \(file): \(error.localizedDescription)")
        }
        guard case .object(let root)? = try? JSONValue.parse(text) else {
            throw ConfigurationError("\(file): not a JSON object")
        }
        var senders: [String: String] = [:]
        if case .array(let list)? = root["senders"] {
            for entry in list {
                guard case .object(let e) = entry, case .string(let key)? = e["server_key"] else {
                    throw ConfigurationError("\(file): each sender needs \"sender_id\" and \"server_key\"")
                }
                let id: String
                switch e["sender_id"] {
                case .string(let s)?: id = s
                case .int(let n)? where n >= 0: id = String(n)
                default: throw ConfigurationError("\(file): each sender needs \"sender_id\" and \"server_key\"")
                }
                guard !id.isEmpty, id.allSatisfy({ $0.isASCII && $0.isNumber }), !key.isEmpty else {
                    throw ConfigurationError("\(file): sender_id must be numeric and server_key non-empty")
                }
                senders[id] = key
            }
        }
        return senders
    }

    /// The ready line: one JSON object naming every bound port.
    public var readyLine: String {
        var w = JSONObjectWriter()
        w.add("event", "ready")
        w.add("ccs_port", info.ccsPort)
        w.add("device_port", info.devicePort)
        w.add("http_port", info.httpPort)
        w.add("ca_cert", info.caCertPath)
        w.add("data_dir", info.dataDir)
        return w.finished()
    }

    /// Graceful stop: CONNECTION_DRAINING to every app server, a short wait for answers in flight, then
    /// the listeners and connections close and the store commits whatever it still holds.
    public func shutdown(maxWait: Duration = .seconds(2)) async {
        ticker.cancel()
        engine.drainAll()
        let deadline = ContinuousClock.now.advanced(by: maxWait)
        while ContinuousClock.now < deadline, engine.connections().contains(where: { $0.pending > 0 }) {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for c in channels { try? await c.close() }
        engine.closeAllConnections()
        try? await Task.sleep(for: .milliseconds(100)) // lets the closing tags go out
        await http.triggerGracefulShutdown()
        _ = await httpTask.result
        if let virtual = engine.clock as? VirtualClock {
            engine.committer.submit(.setMeta(key: VirtualClock.metaKey, value: String(virtual.nowMillis())))
        }
        // The store first: its last completions still hop to the event loops.
        await engine.committer.shutdown()
        try? await group.shutdownGracefully()
    }
}
