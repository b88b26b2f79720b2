import DeliveryCore
import ArgumentParser
import CCSEmulator
import ConnectProxy
import CCSEngine
import StoreModel
import SQLiteStore
import Foundation
import Logging
import MessageJournal
import XMPPServer

@main
struct CCSEmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ccs-emulator",
        abstract: "A local emulator of the Firebase/GCM XMPP Connection Server (CCS), with simulated devices.",
        discussion: """
            App servers connect over TLS XMPP (port 5235) with SASL PLAIN as SENDER_ID@gcm.googleapis.com and \
            their server key; simulated devices connect to the device channel (port 5228); the admin API is \
            HTTP on port 8080 under /emulator/v1/. See README.md and docs/.
            """,
        version: ccsEmulatorVersion,
        subcommands: [Serve.self, Device.self, Send.self, Credentials.self, APNsCert.self, APNsKeyCommand.self, Bench.self, Conformance.self,
                      Export.self],
        defaultSubcommand: Serve.self)
}

/// `ccs-emulator --version`. Raise it with every change to the wire behaviour or the command line.
let ccsEmulatorVersion = "0.1.0"

/// One line of JSON on stdout, flushed at once; lines from different threads never interleave.
enum Output {
    private static let lock = NSLock()

    static func line(_ text: String) {
        lock.lock()
        defer { lock.unlock() }
        // The throwing write: on a full disk (or a closed pipe) the line is lost, the process is not.
        try? FileHandle.standardOutput.write(contentsOf: Data((text + "\n").utf8))
    }
}

func makeLogger(_ label: String, level: Logger.Level, format: LogFormat = .text) -> Logger {
    LoggingSystem.bootstrap { label in
        switch format {
        case .text:
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        case .json:
            var handler = JSONLogHandler(label: label)
            handler.logLevel = level
            return handler
        }
    }
    var logger = Logger(label: label)
    logger.logLevel = level
    return logger
}

extension AuthMode: ExpressibleByArgument {}
extension Store.Durability: ExpressibleByArgument {}
extension ClockKind: ExpressibleByArgument {}
extension OverLimitPolicy: ExpressibleByArgument {}
extension Logger.Level: @retroactive ExpressibleByArgument {}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the emulator.",
        discussion: """
            When every listener is up, prints one JSON line {"event":"ready","ccs_port":…,"device_port":…,\
            "http_port":…,"ca_cert":…,"data_dir":…} on stdout (and writes it to --ready-file), with \
            "https_port" and "proxy_port" when those are served, "cluster_port" with --store, "apns_port" and "apns_feedback_port" \
            (the APNs legacy binary gateway and feedback service) and "apns_http2_port" (the APNs HTTP/2 \
            provider API, docs/apns.md). Without \
            --tls-cert a development CA and a server certificate for localhost, 127.0.0.1, ::1 and the CCS, FCM \
            and APNs host names are created in DATA_DIR/tls and kept; trust DATA_DIR/tls/ca.pem in your client. SIGTERM or \
            SIGINT: CONNECTION_DRAINING to every app server, then a clean exit. One server per data dir: \
            a second one started on the same DATA_DIR refuses to start (DATA_DIR/lock).
            """)

    @Option(help: "Where the database and the development CA live.")
    var dataDir = ".ccs-emulator"
    @Flag(help: "Delete the stored state (senders, devices, queues, the virtual clock) before starting; DATA_DIR/tls, the CA your clients trust, is kept.")
    var resetState = false
    @Option(help: "Address every listener binds. Anything but loopback needs --auth strict (or --open-fcm-apis-without-auth) and --admin-token.")
    var bind = "127.0.0.1"
    @Option(help: ArgumentHelp("A host name (or address) under which the admin API and the dashboard answer, besides loopback and --bind; repeatable. Requests with any other Host are refused (DNS rebinding).", valueName: "name"))
    var publicHost: [String] = []
    @Flag(help: "With a --bind other than loopback, keep permissive auth: the FCM APIs then accept any key from anyone who can reach the port.")
    var openFcmApisWithoutAuth = false
    @Option(help: "CCS port for app servers (XMPP over direct TLS). 0 picks a free port.")
    var ccsPort = 5235
    @Option(help: ArgumentHelp("A second CCS port, as FCM's pre-production port 5236 was: the same service on another port (for app servers that use both, redirected by host name). 0 picks a free port; not served unless given.", valueName: "port"))
    var ccsPreprodPort: Int?
    @Option(help: "Device channel port for simulated devices (XMPP over direct TLS). 0 picks a free port.")
    var devicePort = 5228
    @Option(help: "HTTP port (FCM HTTP APIs and admin API). 0 picks a free port.")
    var httpPort = 8080
    @Option(help: "Also serve the HTTP routes over TLS (development-CA certificate) on this port, in HTTP/2 when the client offers h2 (ALPN), else HTTP/1.1. 0 picks a free port. Default: not served.")
    var httpsPort: Int?
    @Option(help: "Proxy mode: an HTTP CONNECT proxy (HTTPS_PROXY=http://HOST:PORT) that tunnels only to the Google and Apple (APNs HTTP/2) hosts the emulator plays. 0 picks a free port. Default: off.")
    var proxyPort: Int?
    @Option(help: ArgumentHelp("With --proxy-port: every CONNECT must carry this file's first line, USER:PASSWORD, as Proxy-Authorization: Basic (HTTPS_PROXY=http://USER:PASSWORD@HOST:PORT); others get 407. Default: none asked.", valueName: "file"))
    var proxyAuthFile: String?
    @Option(help: "APNs legacy binary gateway port (TLS, provider certificate from `ccs-emulator apns-cert`). 0 picks a free port.")
    var apnsPort = 2195
    @Option(help: "APNs feedback service port (TLS, the same provider certificates). 0 picks a free port.")
    var apnsFeedbackPort = 2196
    @Option(help: "APNs HTTP/2 provider API port (TLS with ALPN h2; provider tokens from `ccs-emulator apns-key` or certificates from `ccs-emulator apns-cert`). 0 picks a free port.")
    var apnsHttp2Port = 2197
    @Option(help: "Largest APNs payload in bytes: 2048 (iOS 8 on), or 256 as the gateway started.")
    var apnsPayloadLimit = 2048
    @Flag(help: "Also accept TLS 1.0 and 1.1 on the APNs ports, for very old provider libraries (default: TLS 1.2 only).")
    var apnsAllowTls1 = false
    @Flag(help: .hidden)
    var benchRoutes = false
    @Option(help: "permissive: any numeric sender ID with a non-empty key is accepted; strict: only senders from --config.")
    var auth: AuthMode = .permissive
    @Option(help: "JSON file: {\"senders\":[{\"sender_id\":\"123\",\"server_key\":\"…\",\"project_id\":\"my-project\"}]} (project_id optional).")
    var config: String?
    @Option(help: "PEM certificate chain to serve instead of the development CA's certificate.")
    var tlsCert: String?
    @Option(help: "PEM private key for --tls-cert.")
    var tlsKey: String?
    @Option(help: "Also write the ready line to this file.")
    var readyFile: String?
    @Option(help: ArgumentHelp("Keep the state in PostgreSQL instead of SQLite in --data-dir: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE (docs/scaling.md).", valueName: "url"))
    var store: String?
    @Option(help: ArgumentHelp("With --store: read the PostgreSQL password from this file (its first line) instead of the URL, which ps shows. Without either, PGPASSWORD from the environment is used.", valueName: "file"))
    var storePasswordFile: String?
    @Option(help: "With --store: the port this node's link to the other nodes listens on (--bind address; 0 picks a free port).")
    var clusterPort = 0
    @Option(help: "With --store: the host the other nodes reach this node's link at (default: --bind, or this machine's host name when --bind is 0.0.0.0 or ::).")
    var clusterHost: String?
    @Option(help: "full: every commit is fsynced; normal: commits survive a crash of the process, not of the machine.")
    var durability: Store.Durability = .full
    @Option(help: "Milliseconds a message handed to an online device (or an upstream message to an app server) waits for the device's (or the app server's) ACK before it is written; ACKed in time, it is never written. 0: written as soon as the store is free.")
    var liveWriteDelay = 20
    @Option(help: "wall, or virtual: time moves only through POST /emulator/v1/clock/advance.")
    var clock: ClockKind = .wall
    @Option(help: "Unanswered downstream messages per app-server connection (the CCS window).")
    var maxPending = 100
    @Option(help: "When an app server exceeds --max-pending: accept, nack (SERVICE_UNAVAILABLE) or close.")
    var overLimit: OverLimitPolicy = .accept
    @Option(help: "Unacknowledged upstream messages and receipts per app-server connection.")
    var maxUnacked = 100
    @Option(help: ArgumentHelp("The device channel's window: messages handed to one device connection and not yet ACKed, at most (1 to 10000). Past it, messages wait in the device's queue under FCM's storage rules and go out as the device ACKs (docs/device-protocol.md).", valueName: "messages"))
    var deviceWindow = Engine.Configuration.defaultDeviceWindow
    @Option(help: "Seconds after which an unacknowledged upstream message or receipt is sent again.")
    var ackTimeout: Double = 60
    @Option(help: "Parallel app-server connections per sender ID.")
    var maxConnections = 1000
    @Option(help: ArgumentHelp("FCM's per-device message limit: off, fcm (240/min,5000/h, as FCM documents it), or windows such as 3/10s,100/h. A message over it is refused: DEVICE_MESSAGE_RATE_EXCEEDED (CCS), DeviceMessageRateExceeded (legacy HTTP), 429 QUOTA_EXCEEDED with Retry-After (HTTP v1).", valueName: "limit"))
    var deviceMessageRate = "off"
    @Option(help: ArgumentHelp("HTTP v1's per-project quota: off, fcm (600000/min, as FCM documents it), or windows such as 10/min. A v1 message over it is answered 429 QUOTA_EXCEEDED with Retry-After.", valueName: "limit"))
    var projectMessageRate = "off"
    @Option(help: ArgumentHelp("A limit on the messages one sender sends to one topic: off, or windows such as 10/min,100/h (FCM publishes no number). A topic message over it is refused: TOPICS_MESSAGE_RATE_EXCEEDED (CCS), TopicsMessageRateExceeded (legacy HTTP), 429 QUOTA_EXCEEDED with Retry-After (HTTP v1); a condition counts against each of its topics.", valueName: "limit"))
    var topicMessageRate = "off"
    @Option(help: ArgumentHelp("FCM's throttling of collapsible messages: off, fcm (a burst of 20 per device, then one more every 3 minutes, as FCM documents it), or BURST,1/PERIOD such as 5,1/10s. A collapsible message past it is held back, not refused, and the newest per collapse key goes when the device's bucket has room (docs/semantics.md).", valueName: "limit"))
    var collapsibleThrottle = "off"
    @Option(help: "on: web devices whose subscription endpoint is a push service get their messages by Web Push (encrypted, VAPID-signed POSTs to the endpoint; docs/platforms.md) instead of the device channel; off: over the device channel.")
    var webPush: Switch = .off
    @Option(help: ArgumentHelp("With --web-push on: PEM certificates to trust for https push services besides the system's (a push service of your own with a private CA).", valueName: "file"))
    var webPushCa: String?
    @Option(help: "on: record app servers' client obligations kept and broken (GET /emulator/v1/audit); off: record nothing (load tests).")
    var audit: Switch = .on
    @Option(help: "on: record every message's life (GET /emulator/v1/messages, the dashboard); off: record nothing (load tests).")
    var journal: Switch = .on
    @Option(help: "How much of the journal is kept: a number of events, an age (30m, 24h, 7d), or both (200000,24h).")
    var journalRetention = "200000,24h"
    @Option(help: "Seconds a drained connection stays open before the emulator closes it.")
    var drainGrace = 10
    @Option(help: "Require Authorization: Bearer TOKEN on the admin API (/emulator/v1/ except health and ca.pem, and /metrics); needed for a --bind other than loopback. Prefer the environment variable CCS_ADMIN_TOKEN, which ps does not show; the device, send and bench commands send it too.")
    var adminToken: String?
    @Option(help: "Seconds a connection may take to authenticate.")
    var authTimeout = 30
    @Option(help: "Seconds an HTTP client may take to send a request head, and again its body; also an APNs TLS handshake, and a cluster link's TLS handshake and secret (1 to 3600).")
    var requestTimeout = 30
    @Option(help: "Event-loop threads for the XMPP and HTTP listeners (default: half the cores, at least 1).")
    var threads: Int?
    @Option(help: "Shards the devices are partitioned over, each with its own delivery core and lock, so that sends to devices on different shards never wait for each other (1 to 64; default: one per event-loop thread; docs/architecture.md, \"Shards\").")
    var shards: Int?
    @Option(help: "trace, debug, info, notice, warning, error or critical (logs go to stderr).")
    var logLevel: Logger.Level = .notice
    @Option(name: .customLong("import"), help: ArgumentHelp("Replace the state in --data-dir with an export's (docs/export-format.md) before starting.", valueName: "dir"))
    var importDirectory: String?
    @Option(help: ArgumentHelp("At a graceful stop (SIGINT, SIGTERM), write an export of the state into this directory.", valueName: "dir"))
    var exportOnExit: String?
    @Option(help: "text, or json: one JSON object per log line (time, level, label, message, metadata, source).")
    var logFormat: LogFormat = .text

    func validate() throws {
        for (name, port) in [("--ccs-port", ccsPort), ("--device-port", devicePort), ("--http-port", httpPort),
                             ("--https-port", httpsPort ?? 0), ("--proxy-port", proxyPort ?? 0),
                             ("--ccs-preprod-port", ccsPreprodPort ?? 0),
                             ("--apns-port", apnsPort), ("--apns-feedback-port", apnsFeedbackPort),
                             ("--apns-http2-port", apnsHttp2Port)]
        where !(0...65535).contains(port) {
            throw ValidationError("\(name) must be 0...65535")
        }
        if maxPending < 1 || maxUnacked < 1 || maxConnections < 1 {
            throw ValidationError("--max-pending, --max-unacked and --max-connections must be at least 1")
        }
        if !Engine.Configuration.deviceWindowRange.contains(deviceWindow) {
            let range = Engine.Configuration.deviceWindowRange
            throw ValidationError("--device-window must be \(range.lowerBound)...\(range.upperBound) messages")
        }
        if !(256...65_535).contains(apnsPayloadLimit) {
            throw ValidationError("--apns-payload-limit must be 256...65535 bytes (Apple: 2048, originally 256)")
        }
        if let threads, !(1...256).contains(threads) { throw ValidationError("--threads must be 1...256") }
        if let shards, !(1...Engine.maximumShards).contains(shards) {
            throw ValidationError("--shards must be 1...\(Engine.maximumShards)")
        }
        if !(0...65535).contains(clusterPort) { throw ValidationError("--cluster-port must be 0...65535") }
        if !(0...1000).contains(liveWriteDelay) { throw ValidationError("--live-write-delay must be 0...1000") }
        // Upper bounds too: these become milliseconds or nanoseconds, and an Int64 overflow (or a NaN)
        // would trap the process at start.
        if !(ackTimeout.isFinite && ackTimeout >= 0.001 && ackTimeout <= 2_592_000) {
            throw ValidationError("--ack-timeout must be a number of seconds from 0.001 to 2592000 (30 days)")
        }
        if !(0...86_400).contains(drainGrace) { throw ValidationError("--drain-grace must be 0...86400 seconds") }
        if !(1...86_400).contains(authTimeout) { throw ValidationError("--auth-timeout must be 1...86400 seconds") }
        if !(1...3600).contains(requestTimeout) { throw ValidationError("--request-timeout must be 1...3600 seconds") }
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together") }
        if webPushCa != nil && webPush != .on { throw ValidationError("--web-push-ca goes with --web-push on") }
        for (option, value, fcm, _) in rateOptions where value != "off" && MessageRate(parsing: value, fcm: fcm) == nil {
            throw ValidationError("\(option): off, \(fcm == nil ? "or " : "fcm, or ")up to 4 windows LIMIT/PERIOD separated by commas (LIMIT 1 to 1000000; PERIOD s, min, h or d, with an optional count such as 10s; 1 second to 1 day\(fcm == nil ? "; FCM publishes no number, so there is no fcm preset" : ""))")
        }
        if collapsibleThrottle != "off" && CollapsibleThrottleRate(parsing: collapsibleThrottle) == nil {
            throw ValidationError("--collapsible-throttle: off, fcm, or BURST,1/PERIOD (BURST 1 to 1000; PERIOD s, min, h or d, with an optional count such as 10s; 1 second to 1 day)")
        }
    }

    /// The rate-limit options: each one's value, what `fcm` stands for in it (nil: no preset), and
    /// the setting it gives.
    private var rateOptions: [(option: String, value: String, fcm: MessageRate?,
                               setting: WritableKeyPath<EmulatorConfiguration, MessageRate?>)] {
        [("--device-message-rate", deviceMessageRate, .fcm, \.deviceMessageRate),
         ("--project-message-rate", projectMessageRate, .fcmProject, \.projectMessageRate),
         ("--topic-message-rate", topicMessageRate, nil, \.topicMessageRate)]
    }

    /// The PostgreSQL password when the `--store` URL has none: `--store-password-file`, else PGPASSWORD.
    private func storePassword() throws -> String? {
        if let file = storePasswordFile {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw ValidationError("--store-password-file \(file): cannot be read as UTF-8 text")
            }
            return String(text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        }
        return ProcessInfo.processInfo.environment["PGPASSWORD"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The user and password of `--proxy-auth-file` (a file, so that ps does not show them).
    private func proxyCredentials() throws -> ProxyCredentials? {
        guard let file = proxyAuthFile else { return nil }
        guard proxyPort != nil else { throw ValidationError("--proxy-auth-file needs --proxy-port") }
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
            throw ValidationError("--proxy-auth-file \(file): cannot be read as UTF-8 text")
        }
        switch ProxyCredentials.parse(text) {
        case .success(let credentials): return credentials
        case .failure(let error): throw ValidationError("--proxy-auth-file \(file): \(error)")
        }
    }

    func run() async throws {
        let logger = makeLogger("ccs-emulator", level: logLevel, format: logFormat)
        // Before the first big buffer: memory from bursts goes back to the system (MallocTuning).
        MallocTuning.apply()
        var c = EmulatorConfiguration()
        c.dataDirectory = dataDir
        c.resetState = resetState
        c.bindHost = bind
        c.publicHosts = publicHost
        c.openFCMAPIsWithoutAuth = openFcmApisWithoutAuth
        c.adminToken = adminToken ?? ProcessInfo.processInfo.environment["CCS_ADMIN_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        c.ccsPort = ccsPort
        c.ccsPreprodPort = ccsPreprodPort
        c.devicePort = devicePort
        c.httpPort = httpPort
        c.httpsPort = httpsPort
        c.proxyPort = proxyPort
        c.proxyCredentials = try proxyCredentials()
        c.benchRoutes = benchRoutes
        c.apns.gatewayPort = apnsPort
        c.apns.feedbackPort = apnsFeedbackPort
        c.apns.payloadLimit = apnsPayloadLimit
        c.apns.allowTLS1 = apnsAllowTls1
        c.apnsHTTP2.port = apnsHttp2Port
        c.authMode = auth
        c.configFile = config
        c.tlsCertificatePath = tlsCert
        c.tlsKeyPath = tlsKey
        c.durability = durability
        c.storeURL = store
        c.storePassword = try storePassword()
        c.clusterPort = clusterPort
        c.clusterHost = clusterHost
        c.liveWriteDelayMillis = liveWriteDelay
        if let threads { c.eventLoopThreads = threads }
        c.shards = shards
        c.clock = clock
        c.xmpp.maxPendingDownstream = maxPending
        c.maxUnackedOutbound = maxUnacked
        c.deviceWindow = deviceWindow
        c.ackTimeoutMillis = Int64(ackTimeout * 1000)
        c.maxConnectionsPerSender = maxConnections
        c.audit = audit == .on
        c.webPush = webPush == .on
        c.webPushCAPath = webPushCa
        for r in rateOptions { c[keyPath: r.setting] = r.value == "off" ? nil : MessageRate(parsing: r.value, fcm: r.fcm) }
        c.collapsibleThrottle = collapsibleThrottle == "off" ? nil : CollapsibleThrottleRate(parsing: collapsibleThrottle)
        c.journal = journal == .on
        c.importDirectory = importDirectory
        c.exportOnExitDirectory = exportOnExit
        guard let retention = MessageJournal.Retention.parse(journalRetention) else {
            throw ValidationError("--journal-retention: a number of events (1 to 100000000), an age such as 30m, 24h or 7d, or both with a comma")
        }
        c.journalRetention = retention
        c.xmpp.overLimitPolicy = overLimit
        c.xmpp.drainGracePeriod = .seconds(Int64(drainGrace))
        c.xmpp.authenticationTimeout = .seconds(Int64(authTimeout))
        c.requestTimeoutMillis = requestTimeout * 1000

        // Past a file-size limit (RLIMIT_FSIZE) a write fails with EFBIG, like on a full disk, instead
        // of the signal ending the process: the store reports it and downstream answers "unavailable".
        signal(SIGXFSZ, SIG_IGN)
        let signals = SignalWaiter([SIGTERM, SIGINT])
        let emulator: Emulator
        do {
            emulator = try await Emulator.start(c, logger: logger)
        } catch {
            logger.critical("could not start: \(error)")
            throw ExitCode(1)
        }
        let ready = emulator.readyLine
        if let readyFile {
            try (ready + "\n").write(toFile: readyFile, atomically: true, encoding: .utf8)
        }
        Output.line(ready)
        logger.notice("ready", metadata: ["ccs_port": "\(emulator.info.ccsPort)", "device_port": "\(emulator.info.devicePort)",
                                          "http_port": "\(emulator.info.httpPort)", "ca_cert": "\(emulator.info.caCertPath)"])
        let signal = await signals.wait()
        logger.notice("signal \(signal): draining and stopping")
        await emulator.shutdown()
        logger.notice("stopped")
    }
}

/// Turns SIGTERM/SIGINT into an awaitable event (the default action would kill us mid-commit).
final class SignalWaiter {
    private let stream: AsyncStream<Int32>
    private let sources: [any DispatchSourceSignal]

    init(_ signals: [Int32]) {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        self.stream = stream
        var sources: [any DispatchSourceSignal] = []
        for s in signals {
            signal(s, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: s, queue: .global())
            source.setEventHandler { continuation.yield(s) }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    func wait() async -> Int32 {
        for await s in stream { return s }
        return 0
    }
}

/// An on/off option (`--audit on|off`).
enum Switch: String, ExpressibleByArgument, CaseIterable {
    case on, off
}
