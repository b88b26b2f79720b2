import DeliveryCore
import ArgumentParser
import CCSEngine
import CCSProtocol
import PushDomain
import StoreModel
import SQLiteStore
import Foundation
import LoadGenerator
import Locking
import Synchronization

/// `bench topic`: one send to a topic with S subscribers, O of them online, measured in process.
///
/// In process because the figure asked for is the fan-out itself (the engine and the durable store,
/// as shipped); registering a million devices over sockets would take longer than the send and
/// measure the registration path instead. The online subscribers are in-process device links, so the
/// "last device has it" time excludes the network.
struct BenchTopic: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "topic",
        abstract: "One send to a topic with S subscribers, O of them online, in process (engine and durable store as shipped).",
        discussion: """
            Registers --subscribers devices and subscribes them (not measured), connects --online of them \
            through in-process device links, then sends one message to the topic (a data message without a \
            collapse key; --notification: a notification) and prints: the time until \
            the fan-out is committed (the moment an app server would get its ACK), device-messages per second, \
            the time until the last online subscriber has it, and the RSS growth during the fan-out. The \
            store is a temporary SQLite database with synchronous=FULL (--durability normal: NORMAL), deleted \
            afterwards. See docs/benchmarks.md.
            """)

    @Option(help: "Subscribers of the topic (1 … 5,000,000).")
    var subscribers = 100_000

    @Option(help: "How many of them are online (0 … subscribers).")
    var online = 0

    @Option(help: "Store durability: full (as shipped) or normal.")
    var durability: Store.Durability = .full

    @Flag(help: "Send a notification without a collapse key (it collapses under each device's app, FCM's rule) instead of a data message.")
    var notification = false

    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    func validate() throws {
        guard (1...5_000_000).contains(subscribers) else { throw ValidationError("--subscribers must be 1 … 5000000") }
        guard (0...subscribers).contains(online) else { throw ValidationError("--online must be 0 … --subscribers") }
    }

    func run() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ccs-bench-topic-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try Store(path: dir.appendingPathComponent("emulator.sqlite").path, durability: durability)
        let committer = GroupCommitter(store: store)
        defer { committer.shutdownBlocking() }
        let engine = try Engine(committer: committer, clock: WallClock(), configuration: .init())
        let sender = "424242"

        let setupStart = ContinuousClock.now
        let tokens = try await Self.register(subscribers, sender: sender, engine: engine)
        for chunk in stride(from: 0, to: tokens.count, by: 1000) {
            let changes = tokens[chunk..<min(chunk + 1000, tokens.count)].map { TopicSubscriptionChange(token: $0, senderID: sender) }
            let results = await engine.subscribe(Array(changes), to: "bench")
            guard results.allSatisfy({ if case .success = $0 { return true } else { return false } }) else {
                throw ValidationError("subscribing failed: \(results.first { if case .failure = $0 { return true } else { return false } }!)")
            }
        }
        let links = tokens.prefix(online).map { _ in CountingLink() }
        for (token, link) in zip(tokens, links) { engine.deviceConnected(token: token, link: link) }
        await engine.sync()
        let setupSeconds = Self.seconds(ContinuousClock.now - setupStart)

        let rssBefore = ProcessSampler.current.sample()?.rssBytes ?? 0
        let peak = Atomic<Int>(rssBefore)
        let sampling = Task {
            while !Task.isCancelled {
                if let rss = ProcessSampler.current.sample()?.rssBytes, rss > peak.load(ordering: .relaxed) {
                    peak.store(rss, ordering: .relaxed)
                }
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        let start = ContinuousClock.now
        let result: SendResult = await withCheckedContinuation { c in
            engine.send(SendRequest(sender: sender, target: .topic("bench"),
                                    message: Message(messageID: "bench-1", data: ["k": "v"],
                                                     notification: notification ? .object(["title": .string("bench")]) : nil))) {
                c.resume(returning: $0[0])
            }
        }
        let committed = ContinuousClock.now - start
        guard case .fannedOut = result else { throw ValidationError("the send was refused: \(result)") }
        while links.contains(where: { $0.received.load(ordering: .relaxed) == 0 }) { await Task.yield() }
        let lastOnline = links.compactMap { $0.firstAt.withLock { $0 } }.max().map { $0 - start }
        sampling.cancel()
        _ = await sampling.value
        let stored = try store.queueCounts().values.reduce(0, +)

        let commitSeconds = Self.seconds(committed)
        let figures: [String: Any] = [
            "scenario": "topic", "message": notification ? "notification" : "data", "subscribers": subscribers, "online": online, "durability": durability.rawValue,
            "setup_seconds": setupSeconds, "fan_out_committed_seconds": commitSeconds,
            "device_messages_per_second": Double(subscribers) / max(commitSeconds, 1e-9),
            "last_online_device_ms": lastOnline.map { Self.seconds($0) * 1000 } as Any,
            "rss_growth_mb": Double(peak.load(ordering: .relaxed) - rssBefore) / 1_048_576,
            "queue_rows": stored,
        ]
        if json {
            let data = try JSONSerialization.data(withJSONObject: figures.filter { !($0.value is NSNull) }, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print("topic fan-out: \(subscribers) subscribers, \(online) online, durability \(durability.rawValue), \(notification ? "notification" : "data message")")
            print(String(format: "  committed after     %.3f s  (%.0f device-messages/s)", commitSeconds, Double(subscribers) / max(commitSeconds, 1e-9)))
            if let lastOnline { print(String(format: "  last online device  %.1f ms after the send", Self.seconds(lastOnline) * 1000)) }
            print(String(format: "  RSS growth          %.1f MB during the fan-out", Double(peak.load(ordering: .relaxed) - rssBefore) / 1_048_576))
            print("  queue rows          \(stored)")
            print(String(format: "  (setup, not measured: %.1f s)", setupSeconds))
        }
    }

    /// Registers in parallel so that the group committer batches the writes.
    static func register(_ count: Int, sender: String, engine: Engine) async throws -> [String] {
        try await withThrowingTaskGroup(of: [String].self) { group in
            let perTask = 2000
            for start in stride(from: 0, to: count, by: perTask) {
                let n = min(perTask, count - start)
                group.addTask {
                    var tokens: [String] = []
                    tokens.reserveCapacity(n)
                    for _ in 0..<n {
                        tokens.append(try await engine.registerDevice(app: "com.example.bench", senders: [sender], platform: .android).token)
                    }
                    return tokens
                }
            }
            var all: [String] = []
            for try await chunk in group { all += chunk }
            return all
        }
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}

/// An online device in process: counts what it is handed and ACKs nothing (the figures stop there).
final class CountingLink: DeviceLink {
    let received = Atomic<Int>(0)
    let firstAt = Locked<ContinuousClock.Instant?>(nil)

    func deliver(_ messages: [DeviceDelivery]) {
        firstAt.withLock { if $0 == nil { $0 = .now } }
        received.add(messages.count, ordering: .relaxed)
    }
    func close() {}
}

