import Histogram
import NIOCore
import Synchronization

/// Latency distribution in microseconds (HdrHistogram, 3 significant digits, 1 µs to 1 hour).
public struct LatencyHistogram: Sendable {
    public static let highest: UInt64 = 3_600_000_000
    public private(set) var histogram = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: highest,
                                                           numberOfSignificantValueDigits: .three)

    public init() {}

    @inline(__always)
    public mutating func record(nanos: UInt64) {
        let micros = max(1, min(Self.highest, nanos / 1000 + (nanos % 1000 >= 500 ? 1 : 0)))
        _ = histogram.record(micros)
    }

    public mutating func record(micros: UInt64) {
        _ = histogram.record(max(1, min(Self.highest, micros)))
    }

    public mutating func add(_ other: LatencyHistogram) {
        histogram.add(other.histogram)
    }

    public var summary: LatencySummary {
        guard histogram.totalCount > 0 else { return LatencySummary() }
        return LatencySummary(count: Int(histogram.totalCount),
                              p50: histogram.valueAtPercentile(50), p90: histogram.valueAtPercentile(90),
                              p99: histogram.valueAtPercentile(99), p999: histogram.valueAtPercentile(99.9),
                              max: histogram.max, mean: histogram.mean)
    }
}

/// Percentiles in microseconds.
public struct LatencySummary: Sendable, Equatable {
    public var count = 0
    public var p50: UInt64 = 0
    public var p90: UInt64 = 0
    public var p99: UInt64 = 0
    public var p999: UInt64 = 0
    public var max: UInt64 = 0
    public var mean: Double = 0

    public init() {}

    public init(count: Int, p50: UInt64, p90: UInt64, p99: UInt64, p999: UInt64, max: UInt64, mean: Double) {
        self.count = count
        self.p50 = p50
        self.p90 = p90
        self.p99 = p99
        self.p999 = p999
        self.max = max
        self.mean = mean
    }
}

/// What the connections of one event loop count and measure. The counters are atomics (the
/// coordinator reads them for the progress line); the histograms are touched only on `loop`, and read
/// through `snapshot()`, which runs there too. Each loop has its own recorder, so nothing on the hot
/// path is shared between threads.
public final class LoopRecorder: @unchecked Sendable { // histograms: confined to `loop` (see above)
    public let loop: any EventLoop
    public let sent = Atomic<Int>(0)
    public let acked = Atomic<Int>(0)
    public let nacked = Atomic<Int>(0)
    public let errors = Atomic<Int>(0)
    public let delivered = Atomic<Int>(0)
    /// Messages that arrived but do not belong to this run (or arrived twice).
    public let unexpected = Atomic<Int>(0)
    public let lastAckNanos = Atomic<UInt64>(0)
    public let lastDeliveryNanos = Atomic<UInt64>(0)
    var ackLatency = LatencyHistogram()
    var deliveryLatency = LatencyHistogram()
    /// Established connections on this loop (loop-confined, like the histograms).
    var connections: [BenchConnection] = []
    /// The senders among them: only they need the ticker.
    var tickers: [BenchConnection] = []
    var ticker: RepeatedTask?

    public init(loop: any EventLoop) { self.loop = loop }

    func attach(_ connection: BenchConnection) {
        connections.append(connection)
        if connection.wantsTicks { tickers.append(connection) }
    }

    /// One timer per loop drives every sender on it: pacing for a fixed rate, the start and stop of
    /// the run, credits from other connections.
    func startTicking(every interval: TimeAmount) async throws {
        try await loop.submit {
            self.ticker?.cancel()
            self.ticker = self.loop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
                let now = MonotonicClock.nanos()
                var anyClosed = false
                for c in self.tickers {
                    if c.phase == .ready { c.tick(now: now) } else { anyClosed = true }
                }
                if anyClosed { self.tickers.removeAll { $0.phase != .ready } }
            }
        }.get()
    }

    func stopTicking() async throws {
        try await loop.submit {
            self.ticker?.cancel()
            self.ticker = nil
        }.get()
    }

    /// Ends every stream on this loop politely; returns how many were open.
    func closeAll() async throws -> Int {
        try await loop.submit {
            let open = self.connections.filter { $0.phase == .ready }
            for c in open { c.closeStream() }
            self.connections.removeAll()
            self.tickers.removeAll()
            return open.count
        }.get()
    }

    @inline(__always)
    func recordAck(sentAt: UInt64, now: UInt64) {
        ackLatency.record(nanos: now &- sentAt)
        acked.add(1, ordering: .relaxed)
        lastAckNanos.store(now, ordering: .relaxed)
    }

    @inline(__always)
    func recordDelivery(sentAt: UInt64, now: UInt64) {
        deliveryLatency.record(nanos: now &- sentAt)
        delivered.add(1, ordering: .relaxed)
        lastDeliveryNanos.store(now, ordering: .relaxed)
    }

    func snapshot() async throws -> (ack: LatencyHistogram, delivery: LatencyHistogram) {
        try await loop.submit { (self.ackLatency, self.deliveryLatency) }.get()
    }

    func reset() async throws {
        try await loop.submit {
            self.ackLatency = LatencyHistogram()
            self.deliveryLatency = LatencyHistogram()
        }.get()
        sent.store(0, ordering: .relaxed)
        acked.store(0, ordering: .relaxed)
        nacked.store(0, ordering: .relaxed)
        errors.store(0, ordering: .relaxed)
        delivered.store(0, ordering: .relaxed)
        unexpected.store(0, ordering: .relaxed)
    }
}

/// The counters of every loop, summed.
public struct Totals: Sendable, Equatable {
    public var sent = 0
    public var acked = 0
    public var nacked = 0
    public var errors = 0
    public var delivered = 0
    public var unexpected = 0
    public var lastAckNanos: UInt64 = 0
    public var lastDeliveryNanos: UInt64 = 0

    public init() {}

    public init(_ recorders: [LoopRecorder]) {
        for r in recorders {
            sent += r.sent.load(ordering: .relaxed)
            acked += r.acked.load(ordering: .relaxed)
            nacked += r.nacked.load(ordering: .relaxed)
            errors += r.errors.load(ordering: .relaxed)
            delivered += r.delivered.load(ordering: .relaxed)
            unexpected += r.unexpected.load(ordering: .relaxed)
            lastAckNanos = max(lastAckNanos, r.lastAckNanos.load(ordering: .relaxed))
            lastDeliveryNanos = max(lastDeliveryNanos, r.lastDeliveryNanos.load(ordering: .relaxed))
        }
    }

    /// Every sent message has an answer (ACK, NACK or error).
    public var allAnswered: Bool { acked + nacked + errors >= sent }
}
