import Testing
@testable import LoadGenerator

#if canImport(Glibc)
import Glibc
#endif

@Suite("Latency histogram")
struct LatencyHistogramTests {
    @Test func percentilesOfAUniformSpread() {
        var h = LatencyHistogram()
        for ms in 1...1000 { h.record(nanos: UInt64(ms) * 1_000_000) }
        let s = h.summary
        #expect(s.count == 1000)
        // Three significant digits: values are exact to 0.1 %.
        #expect(abs(Double(s.p50) - 500_000) <= 500)
        #expect(abs(Double(s.p90) - 900_000) <= 900)
        #expect(abs(Double(s.p99) - 990_000) <= 990)
        #expect(abs(Double(s.p999) - 999_000) <= 999)
        #expect(abs(Double(s.max) - 1_000_000) <= 1000)
        #expect(abs(s.mean - 500_500) <= 600)
    }

    @Test func mergesAndClamps() {
        var a = LatencyHistogram(), b = LatencyHistogram()
        a.record(nanos: 0)            // below 1 µs: counted as 1 µs
        b.record(nanos: UInt64.max)   // beyond an hour: clamped
        a.add(b)
        #expect(a.summary.count == 2)
        #expect(a.summary.max >= LatencyHistogram.highest - LatencyHistogram.highest / 1000)
        #expect(LatencyHistogram().summary == LatencySummary())
    }
}

@Suite("Pacing and the window")
struct PacingTests {
    @Test func ringMatchesBySequence() {
        var ring = PendingRing(capacity: 100)
        for seq: UInt64 in 0..<100 { ring.insert(seq, at: seq * 10) }
        #expect(ring.count == 100)
        #expect(ring.remove(42) == 420)
        #expect(ring.remove(42) == nil)           // answered twice
        #expect(ring.remove(100_000) == nil)      // never sent
        #expect(ring.count == 99)
        #expect(!ring.isFree(0))
        #expect(ring.isFree(42))
    }

    @Test func openLoopSchedule() {
        // 1000 msg/s for this sender, no phase: message n is due at n ms.
        let plan = SendPlan(mode: .openLoop(perSecond: 1000), quota: nil, window: 100, perSecond: 1000, phase: 0)
        let start: UInt64 = 5_000_000_000
        #expect(plan.due(0, start: start) == start)
        #expect(plan.due(250, start: start) == start + 250_000_000)
        #expect(plan.dueCount(now: start - 1, start: start) == 0)
        #expect(plan.dueCount(now: start, start: start) == 1)
        #expect(plan.dueCount(now: start + 999_999, start: start) == 1)
        #expect(plan.dueCount(now: start + 1_000_000, start: start) == 2)
        #expect(plan.dueCount(now: start + 1_000_000_000, start: start) == 1001)
    }

    @Test func quotasSplitExactly() {
        var o = BenchOptions()
        o.messages = 301
        o.rate = 900
        let plans = (0..<4).map { o.plan(index: $0, senders: 4) }
        #expect(plans.map(\.quota) == [76, 75, 75, 75])
        #expect(plans.map(\.perSecond) == [225, 225, 225, 225])
        #expect(plans.map(\.phase) == [0, 0.25, 0.5, 0.75])
        o.messages = nil
        #expect(o.plan(index: 0, senders: 4).quota == nil)
    }
}

@Suite("Process figures")
struct ProcessSamplerTests {
    @Test func statWithSpacesInTheName() {
        let stat = "1234 (my (odd) server) S 1 1234 1234 0 -1 4194560 5000 0 0 0 250 50 0 0 20 0 9 0 100 1000000 2000"
        let ticks = Double(sysconfTicks())
        #expect(ProcessSampler.cpuSeconds(stat: stat) == 300 / ticks)
        #expect(ProcessSampler.cpuSeconds(stat: "garbage") == nil)
    }

    @Test func statusFields() {
        let status = "Name:\tx\nVmHWM:\t   20480 kB\nVmRSS:\t    1024 kB\n"
        #expect(ProcessSampler.statusKiB(status, "VmRSS:") == 1024)
        #expect(ProcessSampler.statusKiB(status, "VmHWM:") == 20480)
        #expect(ProcessSampler.statusKiB(status, "VmSwap:") == 0)
    }

    @Test func ownProcess() throws {
        let s = try #require(ProcessSampler.current.sample())
        #expect(s.rssBytes > 0)
        #expect(s.peakRSSBytes >= s.rssBytes)
        // The sampler sees this process use CPU: burn some until its figure moves (bounded).
        var later = s
        var sink = 0
        for round in 0..<200 where later.cpuSeconds <= s.cpuSeconds {
            for i in 0..<1_000_000 { sink &+= i ^ round }
            later = try #require(ProcessSampler.current.sample())
        }
        #expect(sink != 42)
        #expect(later.cpuSeconds > s.cpuSeconds)
    }
}

private func sysconfTicks() -> Int { sysconf(Int32(_SC_CLK_TCK)) }

@Suite("Reports")
struct ReportTests {
    static func sample() -> BenchResult {
        var r = BenchResult(scenario: "downstream", server: "ccs-emulator at 127.0.0.1:5235", connections: 2,
                            devices: 3, payloadBytes: 32, window: 100, rate: nil, threads: 2)
        r.totals.sent = 300
        r.totals.acked = 300
        r.totals.delivered = 300
        r.ackSeconds = 1.5
        r.deliverySeconds = 2
        r.ackLatency = LatencySummary(count: 300, p50: 1500, p90: 2000, p99: 2500, p999: 3000, max: 3100, mean: 1600)
        r.deliveryLatency = LatencySummary(count: 300, p50: 1600, p90: 2100, p99: 2600, p999: 3100, max: 3200, mean: 1700)
        r.usage = ServerUsage(pid: 42, includesGenerator: false, cpuSeconds: 0.6, rssStartBytes: 10 << 20,
                              rssEndBytes: 11 << 20, rssPeakBytes: 12 << 20, vmHWMBytes: 13 << 20)
        return r
    }

    @Test func figures() {
        let r = Self.sample()
        #expect(r.ackThroughput == 200)
        #expect(r.deliveryThroughput == 150)
        #expect(r.cpuPer1000 == 2)
    }

    @Test func json() throws {
        let text = Self.sample().json
        #expect(text.hasPrefix(#"{"scenario":"downstream","server":"ccs-emulator at 127.0.0.1:5235","machine":"#))
        #expect(text.contains(#""counts":{"sent":300,"acked":300,"nacked":0,"errors":0,"delivered":300,"unexpected":0}"#))
        #expect(text.contains(#""throughput":{"ack_per_second":200,"delivered_per_second":150,"ack_seconds":1.5,"delivery_seconds":2}"#))
        #expect(text.contains(#""ack":{"count":300,"p50":1.5,"p90":2,"p99":2.5,"p99_9":3,"max":3.1,"mean":1.6}"#))
        #expect(text.contains(#""cpu_seconds_per_1000_delivered":2"#))
        #expect(text.contains(#""mode":"closed-loop""#))
    }

    @Test func table() {
        let lines = Self.sample().table.split(separator: "\n").map(String.init)
        #expect(lines.contains("counts     sent 300, acked 300, nacked 0, errors 0, delivered 300"))
        #expect(lines.contains("throughput 200 acks/s over 1.50 s, 150 delivered/s over 2.00 s"))
        #expect(lines.contains("send→ACK            1.500    2.000    2.500    3.000    3.100"))
        #expect(lines.contains { $0.hasPrefix("server pid 42: CPU 0.60 s, 2.0000 s per 1000 delivered") })
    }

    @Test func connectionFigures() {
        var r = BenchResult(scenario: "connections", server: "x", connections: 1000, devices: 0, payloadBytes: 0,
                            window: 100, rate: nil, threads: 2)
        r.connectionFigures = ConnectionFigures(requested: 1000, connected: 1000, failed: 0, connectSeconds: 2,
                                                rssBeforeBytes: 50 << 20, rssAfterBytes: (50 << 20) + 1000 * 20480,
                                                cpuSeconds: 1)
        #expect(r.connectionFigures?.rssPerConnectionBytes == 20480)
        #expect(r.table.contains("connected  1000 of 1000 in 2.00 s (500 connections/s)"))
        #expect(r.table.contains("20.0 KiB per connection"))
        #expect(r.json.contains(#""server_rss_per_connection_bytes":20480"#))
        #expect(!r.json.contains("\"counts\""))
    }

    @Test func numberFormatting() {
        #expect(BenchResult.fixed(1.23456, 3) == "1.235")
        #expect(BenchResult.fixed(0.5, 0) == "1")
        #expect(BenchResult.fixed(-2.05, 1) == "-2.1" || BenchResult.fixed(-2.05, 1) == "-2.0")
        #expect(BenchResult.fixed(3, 2) == "3.00")
        #expect(BenchResult.group(0) == "0")
        #expect(BenchResult.group(999) == "999")
        #expect(BenchResult.group(1000) == "1,000")
        #expect(BenchResult.group(1_234_567) == "1,234,567")
        #expect(BenchResult.group(-12_345) == "-12,345")
    }
}
