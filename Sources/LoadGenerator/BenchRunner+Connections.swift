import NIOCore

extension BenchRunner {
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
}
