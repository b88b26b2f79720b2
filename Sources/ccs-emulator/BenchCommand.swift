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
            authenticated TLS connections: memory and connect rate), xmpp-chat (the same shape against any \
            standard XMPP server, e.g. Prosody or ejabberd). Closed loop (window always full) unless --rate \
            asks for a fixed schedule. With --server-pid (or --embedded) the result includes the server's CPU \
            seconds per 1000 delivered messages and its RSS, read from /proc. A progress line appears on a \
            terminal, never on a pipe. See docs/benchmarks.md.
            """,
        subcommands: [BenchDownstream.self, BenchUpstream.self, BenchConnections.self, BenchXMPPChat.self])
}

struct CommonBenchOptions: ParsableArguments {
    @Option(help: "The server: the emulator's HTTP base URL (default http://127.0.0.1:8080; ports and CA come from /emulator/v1/info), or HOST:PORT of an XMPP server (xmpp-chat, connections --xmpp; default 127.0.0.1:5222).")
    var server: String?
    @Option(help: "Sending connections: app-server connections (downstream, upstream), chat senders (xmpp-chat), idle connections (connections).")
    var connections: Int?
    @Option(help: "Simulated devices (downstream, upstream) or chat receivers (xmpp-chat).")
    var devices: Int?
    @Option(help: "Seconds to send for (ignored with --messages; for connections: how long to hold them).")
    var duration: Double = 10
    @Option(help: "Total messages to send, then wait for every answer.")
    var messages: Int?
    @Option(help: "Bytes of padding in each message's payload.")
    var payloadBytes = 32
    @Option(help: "Open loop: this many messages per second in total, latency measured from when each was due. Without it: closed loop, maximum throughput.")
    var rate: Double?
    @Option(help: "Unanswered messages per sending connection (CCS allows 100).")
    var window = 100
    @Option(help: "upstream: messages each device may have sent that no app server has received yet (default: --window × --connections / --devices, at least 1).")
    var deviceWindow: Int?
    @Option(help: "Generator event-loop threads.")
    var threads = System.coreCount
    @Option(help: "PID of the server process, for its CPU time and RSS from /proc.")
    var serverPID: Int32?
    @Option(help: "Seconds to wait for missing answers after sending stops.")
    var drainTimeout: Double = 30
    @Option(help: "Connections opened at the same time during setup.")
    var connectConcurrency = 64
    @Flag(help: "Print the result as one JSON object.")
    var json = false

    func validate() throws {
        if let c = connections, c < 1 { throw ValidationError("--connections must be at least 1") }
        if let d = devices, d < 1 { throw ValidationError("--devices must be at least 1") }
        if let m = messages, m < 1 { throw ValidationError("--messages must be at least 1") }
        if let r = rate, r <= 0 { throw ValidationError("--rate must be positive") }
        if let w = deviceWindow, w < 1 { throw ValidationError("--device-window must be at least 1") }
        if duration < 0 || payloadBytes < 0 || window < 1 || threads < 1 || connectConcurrency < 1 {
            throw ValidationError("--duration and --payload-bytes ≥ 0; --window, --threads and --connect-concurrency ≥ 1")
        }
        if payloadBytes > 3800 { throw ValidationError("--payload-bytes must stay under CCS's 4096-byte payload limit (at most 3800)") }
    }

    func options(defaultConnections: Int, defaultDevices: Int) -> BenchOptions {
        var o = BenchOptions()
        o.connections = connections ?? defaultConnections
        o.devices = devices ?? defaultDevices
        o.messages = messages
        o.duration = duration
        o.payloadBytes = payloadBytes
        o.rate = rate
        o.window = window
        o.deviceWindow = deviceWindow
        o.threads = threads
        o.serverPID = serverPID
        o.drainTimeout = drainTimeout
        o.connectConcurrency = connectConcurrency
        return o
    }
}

struct CCSServerOptions: ParsableArguments {
    @Flag(help: "Start an emulator inside this process (port 0, a temporary data dir, durable SQLite as shipped). Server CPU and RSS then include the generator.")
    var embedded = false
    @Option(help: "Sender ID the app-server connections log in as (default: a fresh random one).")
    var senderID: String?
    @Option(help: "Server key for the sender ID (permissive auth accepts any).")
    var serverKey = "bench-server-key"

    func validate() throws {
        if let s = senderID, s.isEmpty || !s.allSatisfy({ $0.isASCII && $0.isNumber }) {
            throw ValidationError("--sender-id must be numeric")
        }
    }
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

    func target(server: String?) throws -> XMPPTarget {
        let xmppServer = server ?? "127.0.0.1:5222"
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
private func runCCS(_ common: CommonBenchOptions, _ server: CCSServerOptions, defaults: (Int, Int),
                    _ body: @escaping @Sendable (BenchRunner, CCSTarget) async throws -> BenchResult) async throws {
    var options = common.options(defaultConnections: defaults.0, defaultDevices: defaults.1)
    let senderID = server.senderID ?? String(UInt64.random(in: 100_000_000_000...999_999_999_999))
    var embedded: Emulator?
    var tempDir: String?
    let helper = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let target: CCSTarget
    if server.embedded {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ccs-bench-\(UUID().uuidString)").path
        tempDir = dir
        var c = EmulatorConfiguration()
        c.dataDirectory = dir
        c.ccsPort = 0
        c.devicePort = 0
        c.httpPort = 0
        c.maxConnectionsPerSender = max(1000, options.connections)
        // Critical only: the emulator's own shutdown noise would interleave with the result.
        let logger = makeLogger("ccs-emulator", level: .critical)
        let emulator = try await Emulator.start(c, logger: logger)
        embedded = emulator
        let i = emulator.info
        target = CCSTarget(host: "127.0.0.1", ccsPort: i.ccsPort, devicePort: i.devicePort, httpPort: i.httpPort,
                           caPEM: i.caCertPEM, senderID: senderID, serverKey: server.serverKey)
        options.serverPID = getpid()
        options.serverIsThisProcess = true
    } else {
        guard let (host, port) = HTTPJSONClient.parseBaseURL(common.server ?? "http://127.0.0.1:8080") else {
            throw ValidationError("--server must look like http://HOST:PORT")
        }
        do {
            target = try await CCSTarget.discover(host: host, httpPort: port, senderID: senderID,
                                                  serverKey: server.serverKey, group: helper)
        } catch {
            try? await helper.shutdownGracefully()
            throw BenchError("cannot reach the emulator at \(host):\(port): \(error)")
        }
    }
    try? await helper.shutdownGracefully()
    let runner = BenchRunner(options: options)
    let outcome: Result<BenchResult, any Error>
    do { outcome = .success(try await body(runner, target)) } catch { outcome = .failure(error) }
    await runner.shutdown()
    if let embedded { await embedded.shutdown() }
    if let tempDir { try? FileManager.default.removeItem(atPath: tempDir) }
    try print(result: outcome.get(), json: common.json)
}

private func runXMPP(_ common: CommonBenchOptions, defaults: (Int, Int),
                     _ body: @escaping @Sendable (BenchRunner) async throws -> BenchResult) async throws {
    let options = common.options(defaultConnections: defaults.0, defaultDevices: defaults.1)
    let runner = BenchRunner(options: options)
    let outcome: Result<BenchResult, any Error>
    do { outcome = .success(try await body(runner)) } catch { outcome = .failure(error) }
    await runner.shutdown()
    try print(result: outcome.get(), json: common.json)
}

private func print(result: BenchResult, json: Bool) throws {
    Output.line(json ? result.json : result.table)
}

struct BenchDownstream: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "downstream",
        abstract: "App-server connections send to connected simulated devices that ACK.",
        discussion: "Measures ACK and delivery throughput and latency (send→ACK, send→device).")
    @OptionGroup var common: CommonBenchOptions
    @OptionGroup var server: CCSServerOptions
    @Flag(help: "Register the devices but do not connect them: messages are ACKed and stay queued (at most 100 per device). For filling a store.")
    var offline = false

    func run() async throws {
        let offline = self.offline
        try await runCCS(common, server, defaults: (2, 100)) { runner, target in
            try await runner.downstream(target, offline: offline)
        }
    }
}

struct BenchUpstream: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upstream",
        abstract: "Simulated devices send upstream; app-server connections ACK.",
        discussion: "Measures the device channel's `sent` answers (send→sent) and delivery to the app servers (send→app server).")
    @OptionGroup var common: CommonBenchOptions
    @OptionGroup var server: CCSServerOptions

    func run() async throws {
        try await runCCS(common, server, defaults: (2, 100)) { runner, target in try await runner.upstream(target) }
    }
}

struct BenchConnections: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connections",
        abstract: "Opens --connections idle authenticated TLS device connections; reports the server's RSS per connection and the connect rate.",
        discussion: "With --xmpp the connections are XMPP client sessions to --server HOST:PORT (accounts PREFIX1…PREFIXn) instead.")
    @OptionGroup var common: CommonBenchOptions
    @OptionGroup var server: CCSServerOptions
    @Flag(help: "Connect to a standard XMPP server (--server HOST:PORT, see the XMPP options) instead of the emulator's device channel.")
    var xmpp = false
    @OptionGroup var xmppOptions: XMPPServerOptions

    func run() async throws {
        if xmpp {
            let target = try xmppOptions.target(server: common.server)
            try await runXMPP(common, defaults: (1000, 0)) { runner in try await runner.idleConnections(xmpp: target) }
        } else {
            try await runCCS(common, server, defaults: (1000, 0)) { runner, target in
                try await runner.idleConnections(ccs: target)
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
    @OptionGroup var common: CommonBenchOptions
    @OptionGroup var xmppOptions: XMPPServerOptions

    func run() async throws {
        let target = try xmppOptions.target(server: common.server)
        try await runXMPP(common, defaults: (2, 100)) { runner in try await runner.xmppChat(target) }
    }
}
