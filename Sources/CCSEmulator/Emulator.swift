import CCSEngine
import CCSProtocol
import CCSStore
import Foundation
import FCMHTTP
import HTTPAPI
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import ServiceLifecycle
import Synchronization
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
    /// Delete the database (senders, devices, queues, the virtual clock's time) before opening it;
    /// the TLS material in DATA_DIR/tls stays, so clients keep trusting the same CA.
    public var resetState = false

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
    /// Held while this emulator exists; released when it is deallocated (or the process ends).
    let dataDirectoryLock: DataDirectoryLock

    private init(engine: Engine, info: EmulatorInfo, group: MultiThreadedEventLoopGroup, channels: [any Channel],
                 http: ServiceGroup, httpTask: Task<Void, any Error>, logger: Logger, dataDirectoryLock: DataDirectoryLock) {
        self.dataDirectoryLock = dataDirectoryLock
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
        do { try fm.createDirectory(atPath: dataDir, withIntermediateDirectories: true) } catch {
            throw ConfigurationError("cannot create --data-dir \(dataDir): \(error.localizedDescription)")
        }
        // Before anything touches the store: a second server must not open (or reset) it.
        let lock = try DataDirectoryLock.acquire(dataDirectory: dataDir)
        if let problem = lock.problem {
            logger.warning("\(problem); a second server on this data dir would not be refused")
        }
        if config.resetState {
            try resetState(in: dataDir, logger: logger)
        }

        var configuredSenders: [String: String] = [:]
        if let file = config.configFile {
            let senderFile = try loadSenders(from: file)
            if config.authMode == .strict && senderFile.senders.isEmpty {
                throw ConfigurationError(senderFile.noSendersExplanation) // names the unknown keys itself
            }
            for key in senderFile.unknownKeys {
                logger.warning("\(senderFile.unknownKeyWarning(key))")
            }
            configuredSenders = senderFile.senders
        } else if config.authMode == .strict {
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
            let ccs: any Channel, device: any Channel
            do {
                ccs = try await XMPPListener.bind(group: group, host: config.bindHost, port: config.ccsPort, tls: tls,
                                                  role: .appServer, engine: engine, configuration: config.xmpp,
                                                  logger: logger, mailboxes: mailboxes)
            } catch {
                throw ListenerError(error, option: "--ccs-port", port: config.ccsPort, host: config.bindHost)
            }
            channels.append(ccs)
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

            let ports = Mutex(EmulatorInfo(ccsPort: ccs.localAddress?.port ?? 0,
                                           devicePort: device.localAddress?.port ?? 0, httpPort: 0,
                                           caCertPath: caPath, caCertPEM: caPEM, dataDir: dataDir))
            let router = Router()
            AdminAPI(engine: engine, info: { ports.withLock { $0 } }, connectionStatistics: {
                ["idle_parsers_released": XMPPListener.idleParsersReleased]
            }).addRoutes(to: router)
            // The FCM HTTP APIs (legacy send, OAuth2, v1) on the same port and the same engine.
            try FCMHTTPAPI(engine: engine, credentialsDirectory: dataDir + "/credentials").addRoutes(to: router)
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
                if case .failure(let error) = await httpTask.result {
                    throw ListenerError(error, option: "--http-port", port: config.httpPort, host: config.bindHost)
                }
                throw ConfigurationError("the HTTP listener did not start")
            }
            let info = ports.withLock { $0.httpPort = httpPort; return $0 }
            return Emulator(engine: engine, info: info, group: group, channels: channels, http: http,
                            httpTask: httpTask, logger: logger, dataDirectoryLock: lock)
        } catch {
            for c in channels { try? await c.close() }
            try? await group.shutdownGracefully()
            await committer.shutdown()
            throw error
        }
    }

    /// The database files `--reset-state` deletes; DATA_DIR/tls (the CA clients trust) and the lock stay.
    static let databaseFiles = ["ccs-emulator.sqlite", "ccs-emulator.sqlite-wal", "ccs-emulator.sqlite-shm"]

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

    /// Reads `{"senders":[{"sender_id":…,"server_key":…}]}`. Every error names the file and says where
    /// and what is wrong; keys other than "senders" are returned for a warning (a typo such as
    /// "sender" would otherwise silently configure nothing).
    static func loadSenders(from file: String) throws -> SenderFile {
        let text: String
        do { text = try String(contentsOfFile: file, encoding: .utf8) } catch {
            throw ConfigurationError("cannot read --config \(file): \(error.localizedDescription)")
        }
        let root: [String: JSONValue]
        do {
            let value = try JSONValue.parse(text)
            guard case .object(let object) = value else {
                throw ConfigurationError("--config \(file): the top level is \(kind(of: value)), expected a JSON object {\"senders\":[…]}")
            }
            root = object
        } catch let error as JSONParseError {
            throw ConfigurationError("--config \(file) is not valid JSON: \(describe(error, in: text))")
        }
        var result = SenderFile(file: file, foundKeys: root.keys.sorted())
        result.unknownKeys = result.foundKeys.filter { $0 != "senders" }
        guard let listed = root["senders"] else { return result }
        guard case .array(let list) = listed else {
            throw ConfigurationError("--config \(file): \"senders\" is \(kind(of: listed)), expected an array of {\"sender_id\":…,\"server_key\":…}")
        }
        result.sendersListed = true
        for (index, entry) in list.enumerated() {
            let place = "--config \(file): senders[\(index)]"
            guard case .object(let e) = entry else {
                throw ConfigurationError("\(place) is \(kind(of: entry)), expected {\"sender_id\":…,\"server_key\":…}")
            }
            let id: String
            switch e["sender_id"] {
            case .string(let s)?: id = s
            case .int(let n)? where n >= 0: id = String(n)
            case nil: throw ConfigurationError("\(place) has no \"sender_id\"")
            case let other?: throw ConfigurationError("\(place): \"sender_id\" is \(kind(of: other)), expected a string of digits or a non-negative integer")
            }
            guard !id.isEmpty, id.count <= 32, id.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw ConfigurationError("\(place): \"sender_id\" \"\(id)\" is not 1 to 32 digits")
            }
            guard case .string(let key)? = e["server_key"] else {
                throw ConfigurationError("\(place) (sender \(id)) has no \"server_key\" string")
            }
            guard !key.isEmpty else { throw ConfigurationError("\(place) (sender \(id)): \"server_key\" is empty") }
            result.senders[id] = key
        }
        return result
    }

    /// "an array", "a string", … for error texts.
    static func kind(of value: JSONValue) -> String {
        switch value {
        case .object: return "an object"
        case .array: return "an array"
        case .string: return "a string"
        case .bool: return "a boolean"
        case .null: return "null"
        default: return "a number"
        }
    }

    /// "Unexpected character (}) at line 4, column 3 (a trailing comma?)": the parser counts bytes,
    /// people count lines.
    static func describe(_ error: JSONParseError, in text: String) -> String {
        let bytes = Array(text.utf8)
        let position = min(max(error.position, 0), bytes.count)
        var line = 1, lineStart = 0
        for i in 0..<position where bytes[i] == UInt8(ascii: "\n") {
            line += 1
            lineStart = i + 1
        }
        // Columns in characters, not bytes.
        let column = String(decoding: bytes[lineStart..<position], as: UTF8.self).count + 1
        var hint = ""
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") || bytes[position] == UInt8(ascii: "]"),
           let previous = bytes[..<position].last(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }),
           previous == UInt8(ascii: ",") {
            hint = " (a trailing comma? JSON allows none)"
        } else if position < bytes.count, bytes[position] == UInt8(ascii: "'") {
            hint = " (JSON strings take double quotes)"
        }
        return "\(error.reason) at line \(line), column \(column)\(hint)"
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

/// What `--config` holds, and what to say about it.
struct SenderFile {
    var file: String
    /// Every top-level key, sorted.
    var foundKeys: [String]
    var unknownKeys: [String] = []
    var sendersListed = false
    var senders: [String: String] = [:]

    init(file: String, foundKeys: [String]) {
        self.file = file
        self.foundKeys = foundKeys
    }

    /// `"Senders"`, `"sender"`, `"sender_ids"`: near misses of the one key the file may have.
    static func looksLikeSenders(_ key: String) -> Bool {
        key != "senders" && key.lowercased().hasPrefix("sender")
    }

    func unknownKeyWarning(_ key: String) -> String {
        let suggestion = Self.looksLikeSenders(key) ? "did you mean \"senders\"?" : "the only key read is \"senders\""
        return "--config \(file): ignoring the unknown top-level key \"\(key)\" (\(suggestion))"
    }

    /// Why strict mode has nobody to let in.
    var noSendersExplanation: String {
        if sendersListed { return "--auth strict: --config \(file) lists no senders (\"senders\" is empty)" }
        var found = foundKeys.isEmpty ? "the object is empty" : "found keys: " + foundKeys.joined(separator: ", ")
        if foundKeys.contains(where: Self.looksLikeSenders) { found += "; did you mean \"senders\"?" }
        return "--auth strict: --config \(file) lists no senders (\(found))"
    }
}

/// An exclusive `flock` on DATA_DIR/lock, which also holds the owner's PID. Two servers on one data
/// directory would each keep their own picture of who is online: a message the second one ACKs for a
/// device connected to the first would sit in the store until that device reconnects.
final class DataDirectoryLock: Sendable {
    let descriptor: Int32
    /// Why the lock is not held although nobody else holds it (a file system without `flock`).
    let problem: String?

    private init(descriptor: Int32, problem: String? = nil) {
        self.descriptor = descriptor
        self.problem = problem
    }

    static func acquire(dataDirectory: String) throws -> DataDirectoryLock {
        let path = dataDirectory + "/lock"
        // No O_TRUNC: the PID in the file belongs to whoever holds the lock, maybe not us.
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw ConfigurationError("cannot open \(path): \(String(cString: strerror(errno)))")
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let failure = errno
            guard failure == EWOULDBLOCK else {
                // No flock here (some network file systems): run unprotected rather than not at all.
                return DataDirectoryLock(descriptor: fd, problem: "cannot lock \(path): \(String(cString: strerror(failure)))")
            }
            let holder = readPID(fd)
            close(fd)
            let who = holder.map { "PID \($0)" } ?? "another process"
            throw ConfigurationError("data dir \(dataDirectory) is in use by \(who) (another ccs-emulator serve?); "
                                     + "stop it, or pass another --data-dir")
        }
        let pid = Array("\(getpid())\n".utf8)
        // Best effort: without the PID a second server is still refused, only told less.
        _ = ftruncate(fd, 0)
        _ = pwrite(fd, pid, pid.count, 0)
        return DataDirectoryLock(descriptor: fd)
    }

    private static func readPID(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = pread(fd, &buffer, buffer.count, 0)
        guard n > 0 else { return nil }
        return Int32(String(decoding: buffer[..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    deinit { close(descriptor) } // closing the last descriptor releases the lock
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
