import CCSProtocol
import PushDomain
import DeviceSimulator
import Locking
import NIOCore
import NIOPosix
import NIOSSL

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

    // The scenarios: BenchRunner+CCSMessages (downstream, upstream), BenchRunner+XMPPChat,
    // BenchRunner+Connections (idle connections) and HTTPScenario (HTTP sends).

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
