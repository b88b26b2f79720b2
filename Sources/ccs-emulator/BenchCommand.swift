import ArgumentParser
import CCSEmulator
import DeviceSimulator
import Foundation
import LoadGenerator
import Logging
import NIOCore
import NIOPosix

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load generator: throughput, latency and server cost of the emulator (and of other XMPP servers).",
        discussion: """
            Scenarios: downstream (app servers → devices), upstream (devices → app servers), connections (idle \
            authenticated TLS connections: memory and connect rate), http-v1 and http-legacy (the FCM HTTP \
            APIs → devices, and the HTTP server's no-op ceiling), xmpp-chat (the same shape against any \
            standard XMPP server, e.g. Prosody or ejabberd), topic (one topic fan-out, in process) and apns (APNs \
            providers → iOS devices through the binary gateway, in process). `ccs-emulator bench SCENARIO --help` lists a \
            scenario's options and defaults. Closed loop (window always full) unless --rate asks for a fixed \
            schedule. With --server-pid (or --embedded) the result includes the server's CPU seconds per 1000 \
            delivered messages and its RSS, read from /proc. A progress line appears on a terminal, never on \
            a pipe. See docs/benchmarks.md.

            Against a running emulator (--server), the devices a run registers stay registered: bench does \
            not clean up. POST /emulator/v1/reset on that emulator (or a restart with `serve --reset-state`) \
            empties its store and keeps its CA; an --embedded run's store is deleted after the run.
            """,
        subcommands: [BenchDownstream.self, BenchUpstream.self, BenchConnections.self, BenchXMPPChat.self,
                      BenchHTTPV1.self, BenchHTTPLegacy.self, BenchTopic.self, BenchAPNs.self, BenchWebPush.self,
                      BenchAPNsHTTP2.self, BenchEngine.self])
}

/// Options of every scenario that sends messages (downstream, upstream, xmpp-chat).
struct TrafficOptions: ParsableArguments {
    @Option(help: "Seconds to send for (ignored with --messages).")
    var duration: Double = 10
    @Option(help: "Total messages to send, then wait for every answer (default: send for --duration).")
    var messages: Int?
    @Option(help: "Bytes of padding in each message's payload.")
    var payloadBytes = 32
    @Option(help: "Open loop: this many messages per second in total, latency measured from when each was due. Without it: closed loop, maximum throughput.")
    var rate: Double?
    @Option(help: "Unanswered messages per sending connection (CCS allows 100).")
    var window = 100
    @Option(help: "Seconds to wait for missing answers after sending stops.")
    var drainTimeout: Double = 30

    func validate() throws {
        if let m = messages, m < 1 { throw ValidationError("--messages must be at least 1") }
        if let r = rate, r <= 0 { throw ValidationError("--rate must be positive") }
        if duration < 0 || payloadBytes < 0 || window < 1 {
            throw ValidationError("--duration and --payload-bytes ≥ 0; --window ≥ 1")
        }
        if payloadBytes > 3800 { throw ValidationError("--payload-bytes must stay under CCS's 4096-byte payload limit (at most 3800)") }
    }

    func apply(to o: inout BenchOptions) {
        o.messages = messages
        o.duration = duration
        o.payloadBytes = payloadBytes
        o.rate = rate
        o.window = window
        o.drainTimeout = drainTimeout
    }
}

/// Options of every scenario: the generator process and the report.
struct RunOptions: ParsableArguments {
    @Option(help: "Generator event-loop threads; the default is the number of cores.")
    var threads = System.coreCount
    @Option(help: "PID of the server process, for its CPU time and RSS from /proc.")
    var serverPID: Int32?
    @Option(help: "Connections opened at the same time during setup.")
    var connectConcurrency = 64
    @Flag(help: "Print the result as one JSON object.")
    var json = false

    func validate() throws {
        if threads < 1 || connectConcurrency < 1 {
            throw ValidationError("--threads and --connect-concurrency must be at least 1")
        }
    }

    func options(connections: Int, devices: Int) -> BenchOptions {
        var o = BenchOptions()
        o.connections = connections
        o.devices = devices
        o.threads = threads
        o.serverPID = serverPID
        o.connectConcurrency = connectConcurrency
        return o
    }
}

func requirePositive(_ value: Int, _ name: String) throws {
    if value < 1 { throw ValidationError("\(name) must be at least 1") }
}

struct CCSServerOptions: ParsableArguments {
    @Option(help: "The emulator's HTTP base URL (its --http-port; ports and CA come from /emulator/v1/info). Its store keeps the devices this run registers; see `bench --help`.")
    var server = "http://127.0.0.1:8080"
    @Flag(help: "Start an emulator inside this process (port 0, a temporary data dir, durable SQLite as shipped). Server CPU and RSS then include the generator.")
    var embedded = false
    @Option(help: "Sender ID the app-server connections log in as (default: a fresh random one).")
    var senderID: String?
    @Option(help: "Server key for the sender ID (permissive auth accepts any).")
    var serverKey = "bench-server-key"
    @Option(help: ArgumentHelp("Another node of the same service (serve --store postgres://…) for the devices: they register and connect there, the app servers to --server, and every message crosses between the nodes (docs/scaling.md).", valueName: "url"))
    var deviceServer: String?

    func validate() throws {
        if deviceServer != nil && embedded { throw ValidationError("--device-server needs --server, not --embedded") }
        if let s = senderID, s.isEmpty || !s.allSatisfy({ $0.isASCII && $0.isNumber }) {
            throw ValidationError("--sender-id must be numeric")
        }
    }

    var choice: CCSServerChoice {
        CCSServerChoice(server: server, embedded: embedded, senderID: senderID, serverKey: serverKey, deviceServer: deviceServer)
    }
}

/// Which emulator a CCS scenario runs against, and who its app server is.
struct CCSServerChoice {
    var server: String
    var embedded: Bool
    var senderID: String?
    var serverKey: String
    var deviceServer: String? = nil
}

struct XMPPServerOptions: ParsableArguments {
    @Option(help: "direct (TLS from the first byte) or starttls.")
    var tls: XMPPLogin.TLSMode = .starttls
    @Option(help: "The server's XMPP domain.")
    var domain = "localhost"
    @Option(help: "Accounts are PREFIX1, PREFIX2, …")
    var userPrefix = "user"
    @Option(help: "Password of every account.")
    var password = "password"
    @Option(help: "Number of the first account.")
    var firstUser = 1

    func target(server xmppServer: String) throws -> XMPPTarget {
        guard let colon = xmppServer.lastIndex(of: ":"), let port = Int(xmppServer[xmppServer.index(after: colon)...]) else {
            throw ValidationError("--server must be HOST:PORT for an XMPP server")
        }
        var host = String(xmppServer[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return XMPPTarget(host: host, port: port, tls: tls, domain: domain, userPrefix: userPrefix,
                          password: password, firstUser: firstUser)
    }
}

extension XMPPLogin.TLSMode: ExpressibleByArgument {}

/// Runs one CCS scenario against --server or an embedded emulator; prints the result.
private func runCCS(_ options: BenchOptions, json: Bool, _ server: CCSServerChoice,
                    _ body: @escaping @Sendable (BenchRunner, CCSTarget) async throws -> BenchResult) async throws {
    var options = options
    let senderID = server.senderID ?? String(UInt64.random(in: 100_000_000_000...999_999_999_999))
    var embedded: EmbeddedBenchServer?
    let helper = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let target: CCSTarget
    if server.embedded {
        let connections = options.connections
        let started = try await EmbeddedBenchServer.start { $0.maxConnectionsPerSender = max(1000, connections) }
        embedded = started
        target = started.target(senderID: senderID, serverKey: server.serverKey)
        options.serverPID = getpid()
        options.serverIsThisProcess = true
    } else {
        guard let (host, port) = HTTPJSONClient.parseBaseURL(server.server) else {
            throw ValidationError("--server must look like http://HOST:PORT")
        }
        do {
            var found = try await CCSTarget.discover(host: host, httpPort: port, senderID: senderID,
                                                     serverKey: server.serverKey, group: helper)
            if let other = server.deviceServer {
                guard let (deviceHost, devicePort) = HTTPJSONClient.parseBaseURL(other) else {
                    throw ValidationError("--device-server must look like http://HOST:PORT")
                }
                let node = try await CCSTarget.discover(host: deviceHost, httpPort: devicePort, senderID: senderID,
                                                        serverKey: server.serverKey, group: helper)
                found.deviceNode = .init(host: node.host, devicePort: node.devicePort, httpPort: node.httpPort, caPEM: node.caPEM)
            }
            target = found
        } catch let error as ValidationError {
            try? await helper.shutdownGracefully()
            throw error
        } catch {
            try? await helper.shutdownGracefully()
            let detail = error is BenchError || error is HTTPJSONClient.Failure ? "\(error)" : ConnectionFailure.describe(error)
            throw BenchError("cannot reach the emulator at \(server.server): \(detail) (is this its --http-port?)")
        }
    }
    try? await helper.shutdownGracefully()
    let runner = BenchRunner(options: options)
    let outcome: Result<BenchResult, any Error>
    do { outcome = .success(try await body(runner, target)) } catch { outcome = .failure(error) }
    await runner.shutdown()
    await embedded?.stop()
    try print(result: outcome.get(), json: json)
}

/// An emulator in this process for a bench run (`--embedded`), on a temporary data directory that
/// `stop` deletes.
struct EmbeddedBenchServer {
    let emulator: Emulator
    let directory: String

    static func start(_ configure: (inout EmulatorConfiguration) -> Void) async throws -> EmbeddedBenchServer {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ccs-bench-\(UUID().uuidString)").path
        var c = EmulatorConfiguration()
        c.dataDirectory = dir
        c.ccsPort = 0
        c.devicePort = 0
        c.httpPort = 0
        c.apns.gatewayPort = 0
        c.apns.feedbackPort = 0
        c.apnsHTTP2.port = 0
        configure(&c)
        // Critical only: the emulator's own shutdown noise would interleave with the result.
        let emulator = try await Emulator.start(c, logger: makeLogger("ccs-emulator", level: .critical))
        return EmbeddedBenchServer(emulator: emulator, directory: dir)
    }

    func target(senderID: String, serverKey: String) -> CCSTarget {
        let i = emulator.info
        return CCSTarget(host: "127.0.0.1", ccsPort: i.ccsPort, devicePort: i.devicePort, httpPort: i.httpPort,
                         caPEM: i.caCertPEM, senderID: senderID, serverKey: serverKey)
    }

    func stop() async {
        await emulator.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

private func runXMPP(_ options: BenchOptions, json: Bool,
                     _ body: @escaping @Sendable (BenchRunner) async throws -> BenchResult) async throws {
    let runner = BenchRunner(options: options)
    let outcome: Result<BenchResult, any Error>
    do { outcome = .success(try await body(runner)) } catch { outcome = .failure(error) }
    await runner.shutdown()
    try print(result: outcome.get(), json: json)
}

private func print(result: BenchResult, json: Bool) throws {
    Output.line(json ? result.json : result.table)
}

struct BenchDownstream: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "downstream",
        abstract: "App-server connections send to connected simulated devices that ACK.",
        discussion: "Measures ACK and delivery throughput and latency (send→ACK, send→device).")
    @Option(help: "App-server connections that send.")
    var connections = 2
    @Option(help: "Simulated devices that receive (registered for the run).")
    var devices = 100
    @Flag(help: "Register the devices but do not connect them: messages are ACKed and stay queued (at most 100 per device). For filling a store.")
    var offline = false
    @OptionGroup(title: "Emulator") var server: CCSServerOptions
    @OptionGroup(title: "Traffic") var traffic: TrafficOptions
    @OptionGroup(title: "Generator") var generator: RunOptions

    func validate() throws {
        try requirePositive(connections, "--connections")
        try requirePositive(devices, "--devices")
    }

    func run() async throws {
        let offline = self.offline
        var options = generator.options(connections: connections, devices: devices)
        traffic.apply(to: &options)
        try await runCCS(options, json: generator.json, server.choice) { runner, target in
            try await runner.downstream(target, offline: offline)
        }
    }
}

struct BenchUpstream: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upstream",
        abstract: "Simulated devices send upstream; app-server connections ACK.",
        discussion: "Measures the device channel's `sent` answers (send→sent) and delivery to the app servers (send→app server).")
    @Option(help: "App-server connections that receive and ACK.")
    var connections = 2
    @Option(help: "Simulated devices that send (registered for the run).")
    var devices = 100
    @Option(help: "Messages each device may have sent that no app server has received yet (default: --window × --connections / --devices, at least 1).")
    var deviceWindow: Int?
    @OptionGroup(title: "Emulator") var server: CCSServerOptions
    @OptionGroup(title: "Traffic") var traffic: TrafficOptions
    @OptionGroup(title: "Generator") var generator: RunOptions

    func validate() throws {
        try requirePositive(connections, "--connections")
        try requirePositive(devices, "--devices")
        if let w = deviceWindow { try requirePositive(w, "--device-window") }
    }

    func run() async throws {
        var options = generator.options(connections: connections, devices: devices)
        traffic.apply(to: &options)
        options.deviceWindow = deviceWindow
        try await runCCS(options, json: generator.json, server.choice) { runner, target in try await runner.upstream(target) }
    }
}

struct BenchConnections: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connections",
        abstract: "Opens --connections idle authenticated TLS device connections (or app-server connections with --app-servers); reports the server's RSS per connection and the connect rate.",
        discussion: """
            The emulator's --server is its HTTP base URL (default http://127.0.0.1:8080). With --xmpp the \
            connections are XMPP client sessions to --server HOST:PORT (default 127.0.0.1:5222; accounts \
            PREFIX1…PREFIXn) instead.
            """)
    @Option(help: "Idle connections to open (each a registered device, or an XMPP account with --xmpp).")
    var connections = 1000
    @Option(help: "Seconds to hold the connections once all are open.")
    var duration: Double = 10
    @Flag(help: "Connect to a standard XMPP server (--server HOST:PORT, see the XMPP options) instead of the emulator's device channel.")
    var xmpp = false
    @Flag(help: "Open idle app-server connections on the emulator's CCS port (one sender ID; the server's --max-connections must allow them) instead of device connections.")
    var appServers = false
    @Option(help: "The server: the emulator's HTTP base URL, or HOST:PORT with --xmpp.")
    var server: String?
    @Flag(help: "Start an emulator inside this process (port 0, a temporary data dir, durable SQLite as shipped). Server CPU and RSS then include the generator.")
    var embedded = false
    @Option(help: "Sender ID the devices register for (default: a fresh random one).")
    var senderID: String?
    @Option(help: "Server key for the sender ID (permissive auth accepts any).")
    var serverKey = "bench-server-key"
    @OptionGroup(title: "XMPP server (with --xmpp)") var xmppOptions: XMPPServerOptions
    @OptionGroup(title: "Generator") var generator: RunOptions

    func validate() throws {
        try requirePositive(connections, "--connections")
        if duration < 0 { throw ValidationError("--duration must be ≥ 0") }
        if xmpp && embedded { throw ValidationError("--embedded starts an emulator; it does not go with --xmpp") }
        if xmpp && appServers { throw ValidationError("--app-servers opens the emulator's CCS connections; it does not go with --xmpp") }
        if let s = senderID, s.isEmpty || !s.allSatisfy({ $0.isASCII && $0.isNumber }) {
            throw ValidationError("--sender-id must be numeric")
        }
    }

    func run() async throws {
        var options = generator.options(connections: connections, devices: 0)
        options.duration = duration
        if xmpp {
            let target = try xmppOptions.target(server: server ?? "127.0.0.1:5222")
            try await runXMPP(options, json: generator.json) { runner in try await runner.idleConnections(xmpp: target) }
        } else {
            let ccs = CCSServerChoice(server: server ?? "http://127.0.0.1:8080", embedded: embedded,
                                      senderID: senderID, serverKey: serverKey)
            let appServers = self.appServers
            try await runCCS(options, json: generator.json, ccs) { runner, target in
                appServers ? try await runner.idleAppServerConnections(ccs: target) : try await runner.idleConnections(ccs: target)
            }
        }
    }
}

struct BenchXMPPChat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "xmpp-chat",
        abstract: "The downstream shape against a standard XMPP server: --connections senders send <message type=\"chat\"> to --devices receivers.",
        discussion: """
            Accounts PREFIX1…PREFIXn (senders first, then receivers) with one password; each body carries the \
            sender, a sequence number and a send timestamp. XMPP has no per-message server ACK, so a sender's \
            window closes on delivery to its receiver instead.
            """)
    @Option(help: "The XMPP server, HOST:PORT.")
    var server = "127.0.0.1:5222"
    @Option(help: "Chat sessions that send.")
    var connections = 2
    @Option(help: "Chat sessions that receive.")
    var devices = 100
    @OptionGroup(title: "XMPP server") var xmppOptions: XMPPServerOptions
    @OptionGroup(title: "Traffic") var traffic: TrafficOptions
    @OptionGroup(title: "Generator") var generator: RunOptions

    func validate() throws {
        try requirePositive(connections, "--connections")
        try requirePositive(devices, "--devices")
    }

    func run() async throws {
        let target = try xmppOptions.target(server: server)
        var options = generator.options(connections: connections, devices: devices)
        traffic.apply(to: &options)
        try await runXMPP(options, json: generator.json) { runner in try await runner.xmppChat(target) }
    }
}
