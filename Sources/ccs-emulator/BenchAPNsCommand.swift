import DeliveryCore
import ArgumentParser
import CCSEmulator
import CCSEngine
import CCSProtocol
import StoreModel
import Foundation
import LoadGenerator
import Locking
import NIOPosix
import Synchronization

/// `bench apns`: provider connections streaming command-2 frames through the real gateway (TLS, an
/// embedded emulator as shipped) to online iOS devices, which are in-process device links that
/// confirm each notification at once (the device channel's own cost is `bench downstream`'s).
struct BenchAPNs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns",
        abstract: "APNs providers → online iOS devices through the binary gateway (embedded emulator, in process).",
        discussion: """
            Starts an emulator in this process (port 0, a temporary data dir, durable SQLite as shipped), issues \
            a provider certificate, registers --devices iOS devices for APNs and connects them through in-process \
            device links that confirm each notification as it arrives, then opens --connections provider \
            connections over TLS that write --notifications command-2 frames in total (as fast as the sockets \
            take them, or --rate per second in total). Prints accepted and delivered per second, and the \
            provider-write → device latency (p50/p99/max; each payload carries its write time). See \
            docs/benchmarks.md.
            """)

    @OptionGroup var load: APNsBenchLoad

    func run() async throws {
        let server = try await EmbeddedBenchServer.start { _ in }
        let engine = server.emulator.engine
        let bundle = "com.example.bench"
        let cert = try DevelopmentCA.issueProviderCertificate(bundleID: bundle, sandbox: false,
                                                              dataDirectory: server.directory,
                                                              outputDirectory: server.directory + "/apns")
        let (apnsTokens, links) = try await ConfirmingLink.onlineIOSDevices(load.devices, app: bundle, engine: engine)
        let tokens = apnsTokens.map { token in
            let hex = Array(token.utf8)
            return stride(from: 0, to: 64, by: 2).map { UInt8(String(decoding: hex[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
        }
        await engine.sync()

        let group = MultiThreadedEventLoopGroup(numberOfThreads: load.threads)
        let perConnection = load.notifications / load.connections
        var providers: [APNsProviderConnection] = []
        let acceptedBefore = engine.apnsActivity.counts[.accepted] ?? 0
        let start = ContinuousClock.now
        for i in 0..<load.connections {
            let count = perConnection + (i < load.notifications % load.connections ? 1 : 0)
            let plan = APNsProviderConnection.Plan(tokens: tokens, count: count, rate: load.rate.map { $0 / Double(load.connections) })
            providers.append(try await APNsProviderConnection.connect(
                host: "127.0.0.1", port: server.emulator.info.apnsPort, certificatePath: cert.certificatePath,
                keyPath: cert.keyPath, plan: plan, group: group))
        }
        for p in providers { try await p.finished() }
        let written = ContinuousClock.now - start
        // Every accepted notification reaches a device: wait for the last one (or 30 s without progress).
        var lastCount = -1, stalledSince = ContinuousClock.now
        while true {
            let delivered = links.reduce(0) { $0 + $1.received.load(ordering: .relaxed) }
            if delivered >= load.notifications { break }
            if delivered != lastCount { lastCount = delivered; stalledSince = .now }
            if ContinuousClock.now - stalledSince > .seconds(30) { break }
            try await Task.sleep(for: .milliseconds(2))
        }
        let elapsed = ContinuousClock.now - start
        let accepted = (engine.apnsActivity.counts[.accepted] ?? 0) - acceptedBefore
        let delivered = links.reduce(0) { $0 + $1.received.load(ordering: .relaxed) }
        let refused = providers.filter { $0.progress.refused.load(ordering: .relaxed) }.count
        var latencies = links.flatMap { $0.latencies.withLock { $0 } }
        latencies.sort()
        func percentile(_ p: Double) -> Double {
            latencies.isEmpty ? 0 : Double(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]) / 1e6
        }
        for p in providers { await p.close() }
        try? await group.shutdownGracefully()
        await server.stop()

        let seconds = BenchTopic.seconds(elapsed)
        let figures: [String: Any] = [
            "scenario": "apns", "connections": load.connections, "devices": load.devices, "notifications": load.notifications,
            "rate": load.rate as Any, "accepted": Int(accepted), "delivered": delivered, "refused_connections": refused,
            "write_seconds": BenchTopic.seconds(written), "seconds": seconds,
            "accepted_per_second": Double(accepted) / max(seconds, 1e-9),
            "delivered_per_second": Double(delivered) / max(seconds, 1e-9),
            "latency_ms": ["p50": percentile(0.5), "p99": percentile(0.99), "max": percentile(1.0)],
        ]
        if load.json {
            let data = try JSONSerialization.data(withJSONObject: figures.filter { !($0.value is NSNull) }, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print("apns: \(load.connections) provider connections → \(load.devices) online iOS devices, \(load.notifications) notifications"
                  + (load.rate.map { ", \(Int($0))/s" } ?? ", as fast as possible"))
            print(String(format: "  accepted   %d  (%.0f/s)", accepted, Double(accepted) / max(seconds, 1e-9)))
            print(String(format: "  delivered  %d  (%.0f/s)", delivered, Double(delivered) / max(seconds, 1e-9)))
            print(String(format: "  provider write → device  p50 %.2f ms  p99 %.2f ms  max %.2f ms",
                         percentile(0.5), percentile(0.99), percentile(1.0)))
            if refused > 0 { print("  \(refused) connection(s) were refused or closed early") }
        }
    }
}

/// An online iOS device in process: confirms each notification as it arrives (as the device CLI does)
/// and records how long after its provider wrote it (the payload's `t`, DispatchTime nanoseconds).
final class ConfirmingLink: DeviceLink {
    let engine: Engine
    let token: String
    let received = Atomic<Int>(0)
    let latencies = Locked<[UInt64]>([])

    init(engine: Engine, token: String) {
        self.engine = engine
        self.token = token
    }

    /// Registers `count` iOS devices of `app` for APNs and connects each through a link of this kind;
    /// returns their APNs device tokens (hex) and links, in order.
    static func onlineIOSDevices(_ count: Int, app: String, engine: Engine) async throws -> (apnsTokens: [String], links: [ConfirmingLink]) {
        var tokens: [String] = []
        var links: [ConfirmingLink] = []
        for _ in 0..<count {
            let device = try await engine.registerDevice(app: app, senders: [], platform: .ios, apns: .generate)
            let link = ConfirmingLink(engine: engine, token: device.token)
            engine.deviceConnected(token: device.token, link: link)
            links.append(link)
            tokens.append(device.apnsToken!)
        }
        return (tokens, links)
    }

    func deliver(_ messages: [DeviceDelivery]) {
        let now = DispatchTime.now().uptimeNanoseconds
        var sample: [UInt64] = []
        sample.reserveCapacity(messages.count)
        for d in messages {
            if let t = Self.writeTime(d.message.payload), t <= now { sample.append(now - t) }
        }
        latencies.withLock { $0 += sample }
        received.add(messages.count, ordering: .relaxed)
        for d in messages { engine.deviceAcknowledged(token: token, deviceMessageID: d.message.deviceMessageID) }
    }
    func close() {}

    /// The payload's `"t":<digits>` read in place: parsing the whole JSON here would charge the
    /// generator's cost to the emulator (they share the process).
    static func writeTime(_ payload: String) -> UInt64? {
        var payload = payload
        return payload.withUTF8 { bytes -> UInt64? in
            // `"t":` is 4 bytes: compared in place, byte by byte (a `firstIndex` per candidate over
            // the string's view was 5 % of the event loop's samples).
            let n = bytes.count
            var i = 0
            while i + 4 < n {
                if bytes[i] == 0x22 && bytes[i + 1] == 0x74 && bytes[i + 2] == 0x22 && bytes[i + 3] == 0x3A {
                    var value: UInt64 = 0
                    var j = i + 4
                    while j < n, bytes[j] >= 48, bytes[j] <= 57 {
                        value = value &* 10 &+ UInt64(bytes[j] - 48)
                        j += 1
                    }
                    return j > i + 4 ? value : nil
                }
                i += 1
            }
            return nil
        }
    }
}
