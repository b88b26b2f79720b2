import ArgumentParser
import CCSEngine
import DeliveryCore
import Dispatch
import Foundation
import LoadGenerator
import Locking
import PushDomain
import SQLiteStore
import StoreModel
import Synchronization

/// `bench engine`: downstream sends through the engine alone, from plain threads, to devices that
/// confirm each message as it arrives, in process: how throughput grows with `--shards` and sending
/// threads, without sockets, TLS or a generator sharing the cores (docs/benchmarks.md).
struct BenchEngine: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "engine",
        abstract: "Downstream sends through the engine alone (in process), to see how throughput grows with --shards.",
        discussion: """
            Registers --devices devices and connects each through an in-process link that confirms every \
            message as it arrives (not measured). Then --threads plain threads send downstream messages \
            (64-byte payload) round-robin to the devices for --duration seconds, each keeping --window \
            messages unanswered, and it prints the answers per second and the process's CPU seconds per \
            1000 answers. The store is a temporary SQLite database with synchronous=FULL, deleted \
            afterwards; a message its device confirms within --live-write-delay is never written, as in \
            `serve`. No journal, metrics or audit: the engine, its shards and the store only.
            """)

    @Option(help: "The engine's shards (1 … 64).")
    var shards = 1
    @Option(help: "Sending threads (1 … 256).")
    var threads = 2
    @Option(help: "Devices, all connected (1 … 1,000,000).")
    var devices = 1000
    @Option(help: "Unanswered messages each sending thread keeps (1 … 100,000).")
    var window = 100
    @Option(help: "Seconds to send for (0.1 … 3600).")
    var duration = 10.0
    @Option(help: "Milliseconds a live message's write waits for the device's confirmation (0 … 1000; serve's default).")
    var liveWriteDelay = 20
    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    func validate() throws {
        guard (1...Engine.maximumShards).contains(shards) else { throw ValidationError("--shards must be 1 … \(Engine.maximumShards)") }
        guard (1...256).contains(threads) else { throw ValidationError("--threads must be 1 … 256") }
        guard (1...1_000_000).contains(devices) else { throw ValidationError("--devices must be 1 … 1000000") }
        guard (1...100_000).contains(window) else { throw ValidationError("--window must be 1 … 100000") }
        guard duration >= 0.1 && duration <= 3600 else { throw ValidationError("--duration must be 0.1 … 3600") }
        guard (0...1000).contains(liveWriteDelay) else { throw ValidationError("--live-write-delay must be 0 … 1000") }
    }

    func run() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ccs-bench-engine-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try Store(path: dir.appendingPathComponent("emulator.sqlite").path, durability: .full)
        let committer = GroupCommitter(store: store, cancellableDelay: .milliseconds(liveWriteDelay))
        defer { committer.shutdownBlocking() }
        var configuration = Engine.Configuration()
        configuration.shards = shards
        let engine = try Engine(committer: committer, clock: WallClock(), configuration: configuration)

        let counts = Counts()
        let tokens = try Self.connect(devices, to: engine, counts: counts)
        let before = ProcessSampler.current.sample()
        let start = ContinuousClock.now
        let deadline = start + .milliseconds(Int64(duration * 1000))
        let senders = (0..<threads).map { index in
            SendingThread(index: index, of: threads, tokens: tokens, window: window, engine: engine,
                          counts: counts, until: deadline)
        }
        let done = DispatchGroup()
        for sender in senders {
            done.enter()
            Thread { sender.run(); done.leave() }.start()
        }
        done.wait()
        let seconds = BenchTopic.seconds(ContinuousClock.now - start)
        let after = ProcessSampler.current.sample()
        let cpu = before.flatMap { b in after.map { $0.cpuSeconds - b.cpuSeconds } }
        report(counts, seconds: seconds, cpuSeconds: cpu)
    }

    private func report(_ counts: Counts, seconds: Double, cpuSeconds: Double?) {
        let count = counts.answered.load(ordering: .relaxed), refused = counts.refused.load(ordering: .relaxed)
        let rate = Double(count) / max(seconds, 1e-9)
        let perThousand = cpuSeconds.map { $0 / Double(max(count, 1)) * 1000 }
        if json {
            var figures: [String: Any] = ["scenario": "engine", "shards": shards, "threads": threads, "devices": devices,
                                          "window": window, "live_write_delay_ms": liveWriteDelay, "answered": count,
                                          "sent": counts.sent.load(ordering: .relaxed),
                                          "delivered": counts.delivered.load(ordering: .relaxed),
                                          "refused": refused, "seconds": seconds, "answered_per_second": rate,
                                          "cores": ProcessInfo.processInfo.activeProcessorCount]
            if let perThousand { figures["cpu_seconds_per_1000_answered"] = perThousand }
            let data = (try? JSONSerialization.data(withJSONObject: figures, options: [.sortedKeys])) ?? Data()
            print(String(decoding: data, as: UTF8.self))
        } else {
            print("engine: \(shards) shard(s), \(threads) sending thread(s), \(devices) devices, window \(window)")
            print(String(format: "  %.0f answered/s (%d in %.2f s, %d refused)", rate, count, seconds, refused))
            if let perThousand { print(String(format: "  %.4f CPU s per 1000 answered (the whole process)", perThousand)) }
        }
    }

    /// Registers the devices and connects each through a link that confirms what it is given.
    static func connect(_ count: Int, to engine: Engine, counts: Counts) throws -> [String] {
        let registered = Locked<Result<[String], any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                let tokens = try await BenchTopic.register(count, sender: BenchEngine.sender, engine: engine)
                registered.withLock { $0 = .success(tokens) }
            } catch { registered.withLock { $0 = .failure(error) } }
            await engine.sync()
            done.signal()
        }
        done.wait()
        let tokens = try registered.withLock { $0! }.get()
        for token in tokens { engine.deviceConnected(token: token, link: InstantConfirmLink(token: token, engine: engine, counts: counts)) }
        let synced = DispatchSemaphore(value: 0)
        Task { await engine.sync(); synced.signal() }
        synced.wait()
        return tokens
    }

    static let sender = "424242"
}

/// A device that confirms every message the moment it is given it (on the thread that gives it).
final class InstantConfirmLink: DeviceLink {
    let token: String
    /// The engine outlives every run's links (it holds them).
    unowned let engine: Engine
    let counts: Counts

    init(token: String, engine: Engine, counts: Counts) {
        self.token = token
        self.engine = engine
        self.counts = counts
    }

    func deliver(_ messages: [DeviceDelivery]) {
        counts.delivered.add(messages.count, ordering: .relaxed)
        for m in messages { engine.deviceAcknowledged(token: token, deviceMessageID: m.message.deviceMessageID) }
    }
    func close() {}
    var wantsPlatformViews: Bool { false }
}

/// The answers of every sending thread.
final class Counts: Sendable {
    let sent = Atomic<Int>(0)
    let answered = Atomic<Int>(0)
    let refused = Atomic<Int>(0)
    /// Messages the devices were given (each confirmed at once).
    let delivered = Atomic<Int>(0)
}

/// One sending thread: round-robin over its share of the devices, at most `window` unanswered.
struct SendingThread: Sendable {
    let index: Int, of: Int
    let tokens: [String]
    let window: Int
    let engine: Engine
    let counts: Counts
    let until: ContinuousClock.Instant

    func run() {
        // Made empty and filled: libdispatch traps on disposing a semaphore below its initial value.
        let room = DispatchSemaphore(value: 0)
        for _ in 0..<window { room.signal() }
        let padding = String(repeating: "x", count: 64)
        var next = index % tokens.count, sent = 0
        while ContinuousClock.now < until {
            room.wait()
            sent += 1
            counts.sent.add(1, ordering: .relaxed)
            let message = Message(messageID: "e\(index)-\(sent)", data: ["p": padding])
            engine.send(SendRequest(sender: BenchEngine.sender, target: .token(tokens[next]), message: message)) { [counts] results in
                if case .accepted = results[0] {
                    counts.answered.add(1, ordering: .relaxed)
                } else {
                    counts.refused.add(1, ordering: .relaxed)
                }
                room.signal()
            }
            next = (next + of) % tokens.count
        }
        // Every answer in before the thread ends: the last ones are counted too.
        for _ in 0..<window { room.wait() }
    }
}
