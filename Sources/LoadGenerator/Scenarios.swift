import CCSProtocol
import DeviceSimulator
import Locking
import NIOCore
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a CCS emulator listens (as `/emulator/v1/info` reports it) and who the app server is.
public struct CCSTarget: Sendable {
    public var host: String
    public var ccsPort: Int
    public var devicePort: Int
    public var httpPort: Int
    public var caPEM: String
    public var senderID: String
    public var serverKey: String
    public var app = "com.example.bench"
    /// Where the devices register and connect: another node of the same service (a cluster,
    /// docs/scaling.md), so that every message crosses from one node to the other; nil: this one.
    public var deviceNode: DeviceNode?

    /// Another node's device side: its host, device port, HTTP port (registration) and CA.
    public struct DeviceNode: Sendable {
        public var host: String
        public var devicePort: Int
        public var httpPort: Int
        public var caPEM: String

        public init(host: String, devicePort: Int, httpPort: Int, caPEM: String) {
            self.host = host
            self.devicePort = devicePort
            self.httpPort = httpPort
            self.caPEM = caPEM
        }
    }

    /// The node the devices use: `deviceNode`, or this one.
    var devices: DeviceNode {
        deviceNode ?? DeviceNode(host: host, devicePort: devicePort, httpPort: httpPort, caPEM: caPEM)
    }

    public init(host: String, ccsPort: Int, devicePort: Int, httpPort: Int, caPEM: String, senderID: String,
                serverKey: String) {
        self.host = host
        self.ccsPort = ccsPort
        self.devicePort = devicePort
        self.httpPort = httpPort
        self.caPEM = caPEM
        self.senderID = senderID
        self.serverKey = serverKey
    }

    /// Asks a running emulator for its ports and CA.
    public static func discover(host: String, httpPort: Int, senderID: String, serverKey: String,
                                group: any EventLoopGroup) async throws -> CCSTarget {
        let http = HTTPJSONClient(host: host, port: httpPort, group: group)
        let info = try await http.getJSON("/emulator/v1/info")
        guard let ccs = info["ccs_port"]?.intValue, let device = info["device_port"]?.intValue else {
            throw BenchError("\(host):\(httpPort)/emulator/v1/info has no ccs_port/device_port")
        }
        let ca = try await http.request(.GET, "/emulator/v1/ca.pem")
        guard ca.status == 200 else { throw BenchError("could not fetch the emulator's CA (HTTP \(ca.status))") }
        return CCSTarget(host: host, ccsPort: Int(ccs), devicePort: Int(device), httpPort: httpPort, caPEM: ca.body,
                         senderID: senderID, serverKey: serverKey)
    }
}

/// A standard XMPP server with accounts `PREFIX1…PREFIXn` sharing one password.
public struct XMPPTarget: Sendable {
    public var host: String
    public var port: Int
    public var tls: XMPPLogin.TLSMode
    public var domain: String
    public var userPrefix: String
    public var password: String
    /// Number of the first account (user1 by default).
    public var firstUser: Int

    public init(host: String, port: Int, tls: XMPPLogin.TLSMode, domain: String, userPrefix: String = "user",
                password: String = "password", firstUser: Int = 1) {
        self.host = host
        self.port = port
        self.tls = tls
        self.domain = domain
        self.userPrefix = userPrefix
        self.password = password
        self.firstUser = firstUser
    }

    func user(_ i: Int) -> String { "\(userPrefix)\(firstUser + i)" }
}

public struct BenchError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// What every scenario shares.
public struct BenchOptions: Sendable {
    /// App-server connections (downstream, upstream), chat senders (xmpp-chat), idle connections (connections).
    public var connections = 1
    /// Simulated devices (downstream, upstream), chat receivers (xmpp-chat).
    public var devices = 1
    /// Total messages; nil: run for `duration`.
    public var messages: Int?
    public var duration: Double = 10
    public var payloadBytes = 32
    /// Messages per second for all senders together (open loop); nil: closed loop.
    public var rate: Double?
    /// Unanswered messages per sending connection (CCS: 100).
    public var window = 100
    /// Upstream: messages each device may have sent and no app server received yet; nil: as many in
    /// total as the app-server connections' windows hold (window × connections / devices, at least 1).
    public var deviceWindow: Int?
    public var threads = 2
    /// The server process to read /proc for.
    public var serverPID: Int32?
    public var serverIsThisProcess = false
    /// How long to wait for answers after the last message went out.
    public var drainTimeout: Double = 30
    /// Connections opened at the same time while setting up.
    public var connectConcurrency = 64
    public var progress = ProgressLine()

    public init() {}

    var upstreamWindow: Int { deviceWindow ?? max(1, window * connections / max(devices, 1)) }

    func plan(index: Int, senders: Int, window: Int? = nil) -> SendPlan {
        var quota: Int?
        if let messages {
            quota = messages / senders + (index < messages % senders ? 1 : 0)
        }
        let mode: SendMode = rate.map { .openLoop(perSecond: $0) } ?? .closedLoop
        let share = (rate ?? 0) / Double(max(senders, 1))
        return SendPlan(mode: mode, quota: quota, window: window ?? self.window, perSecond: share,
                        phase: Double(index) / Double(max(senders, 1)))
    }
}

/// Runs the scenarios. One instance per run; owns its event loops.
public final class BenchRunner: Sendable {
    let options: BenchOptions
    let group: MultiThreadedEventLoopGroup
    let recorders: [LoopRecorder]
    let loops: [any EventLoop]
    let channels = Locked<[any Channel]>([])

    public init(options: BenchOptions) {
        self.options = options
        _ = ProcessSampler.raiseOpenFileLimit()
        group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, options.threads))
        loops = Array(group.makeIterator())
        recorders = loops.map { LoopRecorder(loop: $0) }
    }

    public func shutdown() async {
        for r in recorders { _ = try? await r.stopTicking() }
        let open = channels.withLock { $0 }
        for c in open { try? await c.close() }
        try? await group.shutdownGracefully()
    }

    // MARK: scenarios

    /// `offline`: the devices are registered but never connect, so every message stays queued in the
    /// emulator (at most 100 per device: FCM's limit for non-collapsible messages).
    public func downstream(_ target: CCSTarget, offline: Bool = false) async throws -> BenchResult {
        var result = makeResult("downstream", server: "ccs-emulator at \(target.host):\(target.ccsPort)")
        let control = RunControl()
        let devices = try await registerDevices(target, count: options.devices)
        if offline {
            result.scenario = "downstream-offline"
            result.notes.append("devices offline: messages are ACKed and stay queued, none is delivered")
        } else {
            try await connectDevices(target, devices, upstream: nil)
        }
        let recipients = Recipients(devices.map(\.token))
        try await connectAppServers(target) { index in
            (plan: self.options.plan(index: index, senders: self.options.connections), control: control,
             recipients: recipients)
        }
        try await measure(&result, control: control, senders: options.connections) { t in
            t.allAnswered && (offline || t.delivered >= t.acked)
        }
        return result
    }

    public func upstream(_ target: CCSTarget) async throws -> BenchResult {
        var result = makeResult("upstream", server: "ccs-emulator at \(target.host):\(target.ccsPort)")
        result.ackLabel = "send→sent"
        result.deliveryLabel = "send→app server"
        result.window = options.upstreamWindow
        result.notes.append("device window \(options.upstreamWindow): messages a device may have sent that no app server has received yet")
        let control = RunControl()
        let credits = DeliveryCredits(senders: options.devices)
        try await connectAppServers(target, upstreamCredits: credits) { _ in nil }
        let devices = try await registerDevices(target, count: options.devices)
        try await connectDevices(target, devices) { index in
            (plan: self.options.plan(index: index, senders: self.options.devices, window: self.options.upstreamWindow),
             control: control, senderID: target.senderID, credits: credits)
        }
        try await measure(&result, control: control, senders: options.devices) { t in
            t.allAnswered && t.delivered >= t.acked
        }
        return result
    }

    public func xmppChat(_ target: XMPPTarget) async throws -> BenchResult {
        var result = makeResult("xmpp-chat", server: "XMPP \(target.domain) at \(target.host):\(target.port) (\(target.tls.rawValue) TLS)")
        result.ackLabel = "-"
        result.deliveryLabel = "send→receiver"
        let control = RunControl()
        let credits = DeliveryCredits(senders: options.connections)
        let receivers = (0..<options.devices).map { "\(target.user(options.connections + $0))@\(target.domain)/bench" }
        let recipients = Recipients(receivers)
        let tls = try Self.insecureClientContext()
        // Receivers first, so that no message finds its recipient offline.
        try await connectMany(count: options.devices, what: "XMPP receivers") { i, loop, recorder in
            let login = Self.chatLogin(target, user: target.user(self.options.connections + i), tls: tls)
            return try await self.connect(host: target.host, port: target.port,
                                          tls: target.tls == .direct ? tls : nil, loop: loop) { promise in
                ChatConnection(login: login, recorder: recorder, established: promise, index: i, sending: nil,
                               credits: credits, payloadBytes: self.options.payloadBytes)
            }
        }
        try await connectMany(count: options.connections, what: "XMPP senders") { i, loop, recorder in
            let login = Self.chatLogin(target, user: target.user(i), tls: tls)
            let sending = (plan: self.options.plan(index: i, senders: self.options.connections), control: control,
                           recipients: recipients)
            return try await self.connect(host: target.host, port: target.port,
                                          tls: target.tls == .direct ? tls : nil, loop: loop) { promise in
                ChatConnection(login: login, recorder: recorder, established: promise, index: i, sending: sending,
                               credits: credits, payloadBytes: self.options.payloadBytes)
            }
        }
        try await measure(&result, control: control, senders: options.connections) { t in
            t.delivered + t.errors >= t.sent
        }
        return result
    }

    /// Opens `connections` idle authenticated connections and reports what they cost the server.
    public func idleConnections(ccs target: CCSTarget) async throws -> BenchResult {
        var result = makeResult("connections", server: "ccs-emulator device channel at \(target.host):\(target.devicePort)")
        let devices = try await registerDevices(target, count: options.connections)
        let tls = try Self.clientContext(caPEM: target.caPEM)
        let isAddress = (try? SocketAddress(ipAddress: target.host, port: 0)) != nil
        let figures = try await measureConnections(count: options.connections) { i, loop, recorder in
            let d = devices[i]
            let login = XMPPLogin(domain: "devices.ccs-emulator", user: d.deviceID, password: d.secret, resource: "device")
            return try await self.connect(host: target.host, port: target.devicePort, tls: tls,
                                          serverHostname: isAddress ? nil : target.host, loop: loop) { promise in
                DeviceChannelConnection(login: login, recorder: recorder, established: promise, index: i,
                                        upstream: nil, payloadBytes: 0)
            }
        }
        result.connectionFigures = figures
        try await hold()
        return result
    }

    /// Opens `connections` idle authenticated app-server connections on the CCS port (all of the
    /// target's sender: the server's per-sender limit, `serve --max-connections`, must allow them).
    public func idleAppServerConnections(ccs target: CCSTarget) async throws -> BenchResult {
        var result = makeResult("connections", server: "ccs-emulator CCS port at \(target.host):\(target.ccsPort)")
        let tls = try Self.clientContext(caPEM: target.caPEM)
        let isAddress = (try? SocketAddress(ipAddress: target.host, port: 0)) != nil
        let figures = try await measureConnections(count: options.connections) { i, loop, recorder in
            let login = Self.appServerLogin(target)
            return try await self.connect(host: target.host, port: target.ccsPort, tls: tls,
                                          serverHostname: isAddress ? nil : target.host, loop: loop) { promise in
                AppServerConnection(login: login, recorder: recorder, established: promise, index: i, sending: nil,
                                    payloadBytes: 0)
            }
        }
        result.connectionFigures = figures
        try await hold()
        return result
    }

    public func idleConnections(xmpp target: XMPPTarget) async throws -> BenchResult {
        var result = makeResult("connections", server: "XMPP \(target.domain) at \(target.host):\(target.port) (\(target.tls.rawValue) TLS)")
        let tls = try Self.insecureClientContext()
        let credits = DeliveryCredits(senders: 0)
        let figures = try await measureConnections(count: options.connections) { i, loop, recorder in
            let login = Self.chatLogin(target, user: target.user(i), tls: tls)
            return try await self.connect(host: target.host, port: target.port,
                                          tls: target.tls == .direct ? tls : nil, loop: loop) { promise in
                ChatConnection(login: login, recorder: recorder, established: promise, index: i, sending: nil,
                               credits: credits, payloadBytes: 0)
            }
        }
        result.connectionFigures = figures
        try await hold()
        return result
    }

    // MARK: measuring

    func makeResult(_ scenario: String, server: String) -> BenchResult {
        var r = BenchResult(scenario: scenario, server: server, connections: options.connections,
                            devices: scenario == "connections" ? 0 : options.devices,
                            payloadBytes: options.payloadBytes, window: options.window, rate: options.rate,
                            threads: loops.count)
        if options.serverIsThisProcess {
            r.notes.append("embedded: the emulator runs inside the generator's process, so server CPU and RSS include the generator")
        }
        return r
    }

    /// The measured phase: start every sender at once, watch, stop, wait for the answers, collect.
    func measure(_ result: inout BenchResult, control: RunControl, senders: Int,
                 complete: @Sendable (Totals) -> Bool) async throws {
        let sampler = options.serverPID.map(ProcessSampler.init(pid:))
        let own = ProcessSampler.current
        for r in recorders { try await r.startTicking(every: .milliseconds(1)) }
        let before = sampler?.sample()
        let ownBefore = own.sample()
        var peak = before?.rssBytes ?? 0
        let start = MonotonicClock.nanos()
        control.start(at: start)
        let deadline = options.messages == nil ? start + UInt64(options.duration * 1e9) : UInt64.max
        var stoppedAt: UInt64?
        var lastProgress: UInt64 = 0
        var lastActivity = 0
        var lastChange = start
        while true {
            try await Task.sleep(for: .milliseconds(20))
            let now = MonotonicClock.nanos()
            let t = Totals(recorders)
            if now - lastProgress >= 250_000_000 {
                lastProgress = now
                if let s = sampler?.sample() { peak = max(peak, s.rssBytes) }
                let secs = Double(now - start) / 1e9
                options.progress.update("[\(BenchResult.fixed(secs, 1)) s] sent \(t.sent)  acked \(t.acked)  delivered \(t.delivered)  "
                                        + "\(BenchResult.group(Int(Double(t.delivered) / max(secs, 0.001)))) delivered/s"
                                        + (t.errors + t.nacked > 0 ? "  errors \(t.errors + t.nacked)" : ""))
            }
            let activity = t.acked + t.nacked + t.errors + t.delivered
            if activity != lastActivity {
                lastActivity = activity
                lastChange = now
            }
            if stoppedAt == nil {
                let quotaDone = options.messages.map { t.sent >= $0 } ?? false
                if now >= deadline || quotaDone {
                    control.stop()
                    stoppedAt = now
                }
                continue
            }
            // Every loop has ticked at least once since the stop: `sent` is final.
            guard now - stoppedAt! > 20_000_000 else { continue }
            if complete(t) { break }
            if Double(now - lastChange) / 1e9 > options.drainTimeout {
                result.notes.append("stopped waiting: nothing arrived for \(Int(options.drainTimeout)) s with answers or deliveries still missing")
                break
            }
        }
        options.progress.finish()
        for r in recorders { try await r.stopTicking() }
        let after = sampler?.sample()
        let t = Totals(recorders)
        result.totals = t
        result.ackSeconds = t.lastAckNanos > start ? Double(t.lastAckNanos - start) / 1e9 : 0
        result.deliverySeconds = t.lastDeliveryNanos > start ? Double(t.lastDeliveryNanos - start) / 1e9 : 0
        var ack = LatencyHistogram(), delivery = LatencyHistogram()
        for r in recorders {
            let (a, d) = try await r.snapshot()
            ack.add(a)
            delivery.add(d)
        }
        result.ackLatency = ack.summary
        result.deliveryLatency = delivery.summary
        if let before, let after, let pid = options.serverPID {
            peak = max(peak, after.rssBytes)
            result.usage = ServerUsage(pid: pid, includesGenerator: options.serverIsThisProcess,
                                       cpuSeconds: after.cpuSeconds - before.cpuSeconds, rssStartBytes: before.rssBytes,
                                       rssEndBytes: after.rssBytes, rssPeakBytes: peak, vmHWMBytes: after.peakRSSBytes)
        }
        if let ownBefore, let ownAfter = own.sample(), !options.serverIsThisProcess {
            result.generatorCPUSeconds = ownAfter.cpuSeconds - ownBefore.cpuSeconds
        }
        for r in recorders { _ = try await r.closeAll() }
    }

    func measureConnections(count: Int, _ open: @escaping @Sendable (Int, any EventLoop, LoopRecorder) async throws -> any Channel)
        async throws -> ConnectionFigures {
        let sampler = options.serverPID.map(ProcessSampler.init(pid:))
        // Let the server settle after the registrations (their commits, their garbage).
        try await Task.sleep(for: .seconds(1))
        let before = sampler?.sample()
        let start = MonotonicClock.nanos()
        let (connected, failed, firstError) = await openMany(count: count, what: "connections", open)
        let seconds = Double(MonotonicClock.nanos() - start) / 1e9
        let cpuAfterConnect = sampler?.sample()?.cpuSeconds
        try await Task.sleep(for: .seconds(2))
        let after = sampler?.sample()
        var f = ConnectionFigures(requested: count, connected: connected, failed: failed, connectSeconds: seconds,
                                  rssBeforeBytes: before?.rssBytes, rssAfterBytes: after?.rssBytes, firstError: firstError)
        if let b = before?.cpuSeconds, let a = cpuAfterConnect { f.cpuSeconds = a - b }
        return f
    }

    /// Keeps idle connections open for `duration` (when asked), then closes them.
    func hold() async throws {
        if options.messages == nil && options.duration > 0 {
            let end = MonotonicClock.nanos() + UInt64(options.duration * 1e9)
            while MonotonicClock.nanos() < end {
                try await Task.sleep(for: .milliseconds(250))
            }
        }
        for r in recorders { _ = try await r.closeAll() }
    }

    // MARK: setting up

    struct Registration: Sendable {
        var token: String
        var deviceID: String
        var secret: String
    }

    /// Registers devices over the admin API, a few at a time.
    func registerDevices(_ target: CCSTarget, count: Int) async throws -> [Registration] {
        let http = HTTPJSONClient(host: target.devices.host, port: target.devices.httpPort, group: group)
        let body = JSONValue.object(["app": .string(target.app), "senders": .array([.string(target.senderID)]),
                                     "platform": .string("android")])
        var out = [Registration?](repeating: nil, count: count)
        var next = 0
        let progress = options.progress
        try await withThrowingTaskGroup(of: (Int, Registration).self) { tasks in
            func add(_ i: Int) {
                tasks.addTask {
                    let json = try await http.postJSON("/emulator/v1/devices", body)
                    guard let c = DeviceCredentials(json: json) else { throw BenchError("unexpected registration answer") }
                    return (i, Registration(token: c.token, deviceID: c.deviceID, secret: c.secret))
                }
            }
            while next < min(count, 16) { add(next); next += 1 }
            var done = 0
            while let (i, r) = try await tasks.next() {
                out[i] = r
                done += 1
                if done % 100 == 0 { progress.update("registering devices: \(done) of \(count)") }
                if next < count { add(next); next += 1 }
            }
        }
        progress.finish()
        return out.map { $0! }
    }

    func connectDevices(_ target: CCSTarget, _ devices: [Registration],
                        upstream: (@Sendable (Int) -> (plan: SendPlan, control: RunControl, senderID: String, credits: DeliveryCredits))?) async throws {
        let node = target.devices
        let tls = try Self.clientContext(caPEM: node.caPEM)
        let isAddress = (try? SocketAddress(ipAddress: node.host, port: 0)) != nil
        let payload = options.payloadBytes
        try await connectMany(count: devices.count, what: "devices") { i, loop, recorder in
            let d = devices[i]
            let login = XMPPLogin(domain: "devices.ccs-emulator", user: d.deviceID, password: d.secret, resource: "device")
            let up = upstream?(i)
            return try await self.connect(host: node.host, port: node.devicePort, tls: tls,
                                          serverHostname: isAddress ? nil : node.host, loop: loop) { promise in
                DeviceChannelConnection(login: login, recorder: recorder, established: promise, index: i,
                                        upstream: up, payloadBytes: payload)
            }
        }
    }

    func connectAppServers(_ target: CCSTarget, upstreamCredits: DeliveryCredits? = nil,
                           sending: @escaping @Sendable (Int) -> (plan: SendPlan, control: RunControl, recipients: Recipients)?)
        async throws {
        let tls = try Self.clientContext(caPEM: target.caPEM)
        let isAddress = (try? SocketAddress(ipAddress: target.host, port: 0)) != nil
        let payload = options.payloadBytes
        try await connectMany(count: options.connections, what: "app-server connections") { i, loop, recorder in
            let login = Self.appServerLogin(target)
            let s = sending(i)
            return try await self.connect(host: target.host, port: target.ccsPort, tls: tls,
                                          serverHostname: isAddress ? nil : target.host, loop: loop) { promise in
                AppServerConnection(login: login, recorder: recorder, established: promise, index: i, sending: s,
                                    upstreamCredits: upstreamCredits, payloadBytes: payload)
            }
        }
    }

    /// How the bench's app servers log in to CCS: the target's sender and server key.
    static func appServerLogin(_ target: CCSTarget) -> XMPPLogin {
        XMPPLogin(domain: "gcm.googleapis.com", user: "\(target.senderID)@gcm.googleapis.com", password: target.serverKey)
    }

    /// Opens `count` connections, spread over the loops; every one must succeed.
    func connectMany(count: Int, what: String,
                     _ open: @escaping @Sendable (Int, any EventLoop, LoopRecorder) async throws -> any Channel) async throws {
        let (_, failed, firstError) = await openMany(count: count, what: what, open)
        if failed > 0 {
            throw BenchError("\(failed) of \(count) \(what) could not connect: \(firstError ?? "?")")
        }
    }

    func openMany(count: Int, what: String,
                  _ open: @escaping @Sendable (Int, any EventLoop, LoopRecorder) async throws -> any Channel)
        async -> (connected: Int, failed: Int, firstError: String?) {
        var connected = 0, failed = 0
        var firstError: String?
        var next = 0
        let progress = options.progress
        let recorders = self.recorders
        await withTaskGroup(of: Result<any Channel, any Error>.self) { tasks in
            func add(_ i: Int) {
                let r = recorders[i % recorders.count]
                tasks.addTask {
                    do { return .success(try await open(i, r.loop, r)) } catch { return .failure(error) }
                }
            }
            while next < min(count, options.connectConcurrency) { add(next); next += 1 }
            while let outcome = await tasks.next() {
                switch outcome {
                case .success(let channel):
                    connected += 1
                    channels.withLock { $0.append(channel) }
                case .failure(let error):
                    failed += 1
                    if firstError == nil { firstError = "\(error)" }
                }
                if (connected + failed) % 100 == 0 { progress.update("connecting \(what): \(connected + failed) of \(count)") }
                if next < count { add(next); next += 1 }
            }
        }
        progress.finish()
        return (connected, failed, firstError)
    }

    /// One connection, returned once its session is established.
    func connect(host: String, port: Int, tls: NIOSSLContext?, serverHostname: String? = nil, loop: any EventLoop,
                 handler: @escaping @Sendable (EventLoopPromise<Void>) -> BenchConnection) async throws -> any Channel {
        let established = loop.makePromise(of: Void.self)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: loop)
                .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                .connectTimeout(.seconds(30))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let tls {
                            try channel.pipeline.syncOperations.addHandler(
                                try NIOSSLClientHandler(context: tls, serverHostname: serverHostname))
                        }
                        try channel.pipeline.syncOperations.addHandler(handler(established))
                    }
                }
                .connect(host: host, port: port).get()
        } catch {
            established.fail(error)
            throw error
        }
        // The handler settles `established` exactly once: on login, or when the channel goes away.
        let timeout = loop.scheduleTask(in: .seconds(60)) {
            channel.pipeline.fireUserInboundEventTriggered(LoginTimedOut())
        }
        do {
            try await established.futureResult.get()
            timeout.cancel()
        } catch {
            timeout.cancel()
            try? await channel.close()
            throw error
        }
        return channel
    }

    static func clientContext(caPEM: String) throws -> NIOSSLContext {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(caPEM.utf8)))
        return try NIOSSLContext(configuration: tls)
    }

    /// For peers with self-signed certificates on loopback: encryption without verification.
    static func insecureClientContext() throws -> NIOSSLContext {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.certificateVerification = .none
        return try NIOSSLContext(configuration: tls)
    }

    static func chatLogin(_ target: XMPPTarget, user: String, tls: NIOSSLContext) -> XMPPLogin {
        XMPPLogin(domain: target.domain, user: user, password: target.password, resource: "bench", tls: target.tls,
                  startTLSContext: target.tls == .starttls ? tls : nil, sendPresence: true)
    }
}
