import APNsProviderAPI
import ArgumentParser
import CCSEmulator
import CCSEngine
import Foundation
import LoadGenerator
import NIOPosix

/// `bench apns-http2`: providers with token auth streaming requests through the real HTTP/2 provider
/// API (TLS, ALPN h2, an embedded emulator as shipped) to online iOS devices (in-process links that
/// confirm each notification, as `bench apns` does).
struct BenchAPNsHTTP2: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-http2",
        abstract: "APNs HTTP/2 providers (token auth) → online iOS devices (embedded emulator, in process).",
        discussion: """
            Starts an emulator in this process (port 0, a temporary data dir, durable SQLite as shipped), makes a \
            signing key, registers --devices iOS devices for APNs and connects them through in-process device \
            links, then opens --connections HTTP/2 connections that send --notifications requests in total with \
            one provider token each (up to 100 streams in flight per connection once the token verified; \
            or --rate per second in total). Prints answered 200 and delivered per second and the request → \
            device latency (p50/p99/max). See docs/benchmarks.md.
            """)

    @OptionGroup var load: APNsBenchLoad

    func run() async throws {
        let server = try await EmbeddedBenchServer.start { _ in }
        let engine = server.emulator.engine
        let bundle = "com.example.bench"
        let issued = try ProviderKeyIssuer.issue(teamID: "BENCHTEAM1", keyID: "BENCHKEY01", topics: [bundle],
                                                 environment: .both, dataDirectory: server.directory)
        let (tokens, links) = try await ConfirmingLink.onlineIOSDevices(load.devices, app: bundle, engine: engine)
        await engine.sync()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: load.threads)
        let start = ContinuousClock.now
        var providers: [APNsHTTP2Provider] = []
        for i in 0..<load.connections {
            // One token per connection, as Apple asks (a new one at most every 20 minutes).
            let jwt = try APNsHTTP2Provider.providerToken(p8PEM: issued.p8PEM, keyID: "BENCHKEY01", teamID: "BENCHTEAM1",
                                                          issuedAt: engine.clock.nowMillis() / 1000)
            let count = load.notifications / load.connections + (i < load.notifications % load.connections ? 1 : 0)
            let plan = APNsHTTP2Provider.Plan(tokens: tokens, topic: bundle, authorization: "bearer " + jwt, count: count,
                                              rate: load.rate.map { $0 / Double(load.connections) })
            providers.append(try await APNsHTTP2Provider.connect(host: "127.0.0.1", port: server.emulator.info.apnsHTTP2Port,
                                                                 plan: plan, group: group))
        }
        for p in providers { try await p.finished() }
        let accepted = providers.reduce(0) { $0 + $1.progress.accepted.load(ordering: .relaxed) }
        let refused = providers.reduce(0) { $0 + $1.progress.refused.load(ordering: .relaxed) }
        try await waitForDeliveries(links, expected: accepted)
        let elapsed = ContinuousClock.now - start
        for p in providers { await p.close() }
        try? await group.shutdownGracefully()
        await server.stop()
        report(links: links, accepted: accepted, refused: refused, seconds: BenchTopic.seconds(elapsed))
    }

    /// Every accepted notification reaches a device: waits for the last one (or 30 s without progress).
    private func waitForDeliveries(_ links: [ConfirmingLink], expected: Int) async throws {
        var lastCount = -1, stalledSince = ContinuousClock.now
        while true {
            let delivered = links.reduce(0) { $0 + $1.received.load(ordering: .relaxed) }
            if delivered >= expected { return }
            if delivered != lastCount { lastCount = delivered; stalledSince = .now }
            if ContinuousClock.now - stalledSince > .seconds(30) { return }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    private func report(links: [ConfirmingLink], accepted: Int, refused: Int, seconds: Double) {
        let delivered = links.reduce(0) { $0 + $1.received.load(ordering: .relaxed) }
        var latencies = links.flatMap { $0.latencies.withLock { $0 } }
        latencies.sort()
        func percentile(_ p: Double) -> Double {
            latencies.isEmpty ? 0 : Double(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]) / 1e6
        }
        let figures: [String: Any] = [
            "scenario": "apns-http2", "connections": load.connections, "devices": load.devices, "notifications": load.notifications,
            "rate": load.rate as Any, "accepted": accepted, "refused": refused, "delivered": delivered, "seconds": seconds,
            "accepted_per_second": Double(accepted) / max(seconds, 1e-9),
            "delivered_per_second": Double(delivered) / max(seconds, 1e-9),
            "latency_ms": ["p50": percentile(0.5), "p99": percentile(0.99), "max": percentile(1.0)],
        ]
        if load.json, let data = try? JSONSerialization.data(withJSONObject: figures.filter { !($0.value is NSNull) },
                                                         options: [.sortedKeys]) {
            print(String(decoding: data, as: UTF8.self))
            return
        }
        print("apns-http2: \(load.connections) token-auth connections → \(load.devices) online iOS devices, \(load.notifications) notifications"
              + (load.rate.map { ", \(Int($0))/s" } ?? ", as fast as the streams allow"))
        print(String(format: "  answered 200  %d  (%.0f/s), refused %d", accepted, Double(accepted) / max(seconds, 1e-9), refused))
        print(String(format: "  delivered     %d  (%.0f/s)", delivered, Double(delivered) / max(seconds, 1e-9)))
        print(String(format: "  request → device  p50 %.2f ms  p99 %.2f ms  max %.2f ms",
                     percentile(0.5), percentile(0.99), percentile(1.0)))
    }
}
