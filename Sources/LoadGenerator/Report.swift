import CCSProtocol
import PushDomain

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What the server process did during the measured phase (from /proc; only when it runs here).
public struct ServerUsage: Sendable, Equatable {
    public var pid: Int32
    /// The generator runs in the same process (`--embedded`): the CPU figures include it.
    public var includesGenerator: Bool
    public var cpuSeconds: Double
    public var rssStartBytes: Int
    public var rssEndBytes: Int
    /// Largest RSS sampled during the phase (every 100 ms).
    public var rssPeakBytes: Int
    /// The kernel's high-water mark for the process's whole life (VmHWM).
    public var vmHWMBytes: Int

    public init(pid: Int32, includesGenerator: Bool, cpuSeconds: Double, rssStartBytes: Int, rssEndBytes: Int,
                rssPeakBytes: Int, vmHWMBytes: Int) {
        self.pid = pid
        self.includesGenerator = includesGenerator
        self.cpuSeconds = cpuSeconds
        self.rssStartBytes = rssStartBytes
        self.rssEndBytes = rssEndBytes
        self.rssPeakBytes = rssPeakBytes
        self.vmHWMBytes = vmHWMBytes
    }
}

/// For the connections scenario.
public struct ConnectionFigures: Sendable, Equatable {
    public var requested: Int
    public var connected: Int
    public var failed: Int
    public var connectSeconds: Double
    /// Server RSS before the first and after the last connection (after a short settle).
    public var rssBeforeBytes: Int?
    public var rssAfterBytes: Int?
    /// Server CPU spent accepting them (TLS handshakes, SASL, bind).
    public var cpuSeconds: Double?
    public var firstError: String?

    public init(requested: Int, connected: Int, failed: Int, connectSeconds: Double, rssBeforeBytes: Int? = nil,
                rssAfterBytes: Int? = nil, cpuSeconds: Double? = nil, firstError: String? = nil) {
        self.requested = requested
        self.connected = connected
        self.failed = failed
        self.connectSeconds = connectSeconds
        self.rssBeforeBytes = rssBeforeBytes
        self.rssAfterBytes = rssAfterBytes
        self.cpuSeconds = cpuSeconds
        self.firstError = firstError
    }

    public var connectRate: Double { connectSeconds > 0 ? Double(connected) / connectSeconds : 0 }

    public var rssPerConnectionBytes: Double? {
        guard let before = rssBeforeBytes, let after = rssAfterBytes, connected > 0 else { return nil }
        return Double(after - before) / Double(connected)
    }
}

/// One run's figures; rendered as a table for people or as JSON for scripts.
public struct BenchResult: Sendable {
    public var scenario: String
    public var server: String
    public var connections: Int
    public var devices: Int
    public var payloadBytes: Int
    public var window: Int
    /// nil: closed loop.
    public var rate: Double?
    public var threads: Int
    public var totals = Totals()
    /// From the start of sending to the last answer / last delivery.
    public var ackSeconds: Double = 0
    public var deliverySeconds: Double = 0
    public var ackLatency = LatencySummary()
    public var deliveryLatency = LatencySummary()
    /// What "ack" means in this scenario (e.g. "send→ACK").
    public var ackLabel = "send→ACK"
    public var deliveryLabel = "send→device"
    public var usage: ServerUsage?
    public var generatorCPUSeconds: Double?
    public var connectionFigures: ConnectionFigures?
    public var notes: [String] = []

    public init(scenario: String, server: String, connections: Int, devices: Int, payloadBytes: Int, window: Int,
                rate: Double?, threads: Int) {
        self.scenario = scenario
        self.server = server
        self.connections = connections
        self.devices = devices
        self.payloadBytes = payloadBytes
        self.window = window
        self.rate = rate
        self.threads = threads
    }

    public var ackThroughput: Double { ackSeconds > 0 ? Double(totals.acked) / ackSeconds : 0 }
    public var deliveryThroughput: Double { deliverySeconds > 0 ? Double(totals.delivered) / deliverySeconds : 0 }

    /// Server CPU seconds per 1000 delivered messages.
    public var cpuPer1000: Double? {
        guard let usage, totals.delivered > 0 else { return nil }
        return usage.cpuSeconds / Double(totals.delivered) * 1000
    }

    // MARK: JSON

    public var json: String {
        var w = JSONObjectWriter()
        w.add("scenario", scenario)
        w.add("server", server)
        w.add("machine", MachineDescription.current())
        w.add("connections", connections)
        w.add("devices", devices)
        w.add("payload_bytes", payloadBytes)
        w.add("window", window)
        w.add("mode", rate == nil ? "closed-loop" : "open-loop")
        if let rate { w.add("rate", json: .number(rate)) }
        w.add("threads", threads)
        if scenario != "connections" {
            var c = JSONObjectWriter()
            c.add("sent", totals.sent)
            c.add("acked", totals.acked)
            c.add("nacked", totals.nacked)
            c.add("errors", totals.errors)
            c.add("delivered", totals.delivered)
            c.add("unexpected", totals.unexpected)
            w.add("counts", rawJSON: c.finished())
            var t = JSONObjectWriter()
            t.add("ack_per_second", json: Self.rounded(ackThroughput, 1))
            t.add("delivered_per_second", json: Self.rounded(deliveryThroughput, 1))
            t.add("ack_seconds", json: Self.rounded(ackSeconds, 3))
            t.add("delivery_seconds", json: Self.rounded(deliverySeconds, 3))
            w.add("throughput", rawJSON: t.finished())
            var l = JSONObjectWriter()
            l.add("unit", "ms")
            l.add("ack_label", ackLabel)
            l.add("ack", rawJSON: Self.latencyJSON(ackLatency))
            l.add("delivery_label", deliveryLabel)
            l.add("delivery", rawJSON: Self.latencyJSON(deliveryLatency))
            w.add("latency", rawJSON: l.finished())
        }
        if let f = connectionFigures {
            var c = JSONObjectWriter()
            c.add("requested", f.requested)
            c.add("connected", f.connected)
            c.add("failed", f.failed)
            c.add("connect_seconds", json: Self.rounded(f.connectSeconds, 3))
            c.add("connects_per_second", json: Self.rounded(f.connectRate, 1))
            if let v = f.rssBeforeBytes { c.add("server_rss_before_bytes", v) }
            if let v = f.rssAfterBytes { c.add("server_rss_after_bytes", v) }
            if let v = f.rssPerConnectionBytes { c.add("server_rss_per_connection_bytes", json: Self.rounded(v, 0)) }
            if let v = f.cpuSeconds { c.add("server_cpu_seconds", json: Self.rounded(v, 3)) }
            if let e = f.firstError { c.add("first_error", e) }
            w.add("connections_result", rawJSON: c.finished())
        }
        if let u = usage {
            var s = JSONObjectWriter()
            s.add("pid", Int(u.pid))
            s.add("includes_generator", u.includesGenerator)
            s.add("cpu_seconds", json: Self.rounded(u.cpuSeconds, 3))
            if let per = cpuPer1000 { s.add("cpu_seconds_per_1000_delivered", json: Self.rounded(per, 4)) }
            if totals.acked > 0 {
                s.add("cpu_seconds_per_1000_acked", json: Self.rounded(u.cpuSeconds / Double(totals.acked) * 1000, 4))
            }
            s.add("rss_start_bytes", u.rssStartBytes)
            s.add("rss_end_bytes", u.rssEndBytes)
            s.add("rss_peak_bytes", u.rssPeakBytes)
            s.add("vm_hwm_bytes", u.vmHWMBytes)
            w.add("server_process", rawJSON: s.finished())
        }
        if let g = generatorCPUSeconds { w.add("generator_cpu_seconds", json: Self.rounded(g, 3)) }
        if !notes.isEmpty { w.add("notes", json: .array(notes.map { .string($0) })) }
        return w.finished()
    }

    static func rounded(_ v: Double, _ places: Int) -> JSONValue {
        guard v.isFinite else { return .null }
        var f = 1.0
        for _ in 0..<places { f *= 10 }
        return .number((v * f).rounded() / f)
    }

    static func latencyJSON(_ s: LatencySummary) -> String {
        var w = JSONObjectWriter()
        w.add("count", s.count)
        for (k, v) in [("p50", s.p50), ("p90", s.p90), ("p99", s.p99), ("p99_9", s.p999), ("max", s.max)] {
            w.add(k, json: rounded(Double(v) / 1000, 3))
        }
        w.add("mean", json: rounded(s.mean / 1000, 3))
        return w.finished()
    }

    // MARK: text

    public var table: String {
        var lines: [String] = []
        let mode = rate.map { "open loop, \(Self.group(Int($0))) msg/s" } ?? "closed loop"
        lines.append("scenario   \(scenario) against \(server)")
        lines.append("shape      \(connections) connections, \(devices) devices, \(payloadBytes)-byte payload, window \(window), \(mode), \(threads) generator threads")
        if scenario != "connections" {
            let t = totals
            lines.append("counts     sent \(t.sent), acked \(t.acked), nacked \(t.nacked), errors \(t.errors), delivered \(t.delivered)"
                         + (t.unexpected > 0 ? ", unexpected \(t.unexpected)" : ""))
            var throughput: [String] = []
            if t.acked > 0 { throughput.append("\(Self.group(Int(ackThroughput.rounded()))) acks/s over \(Self.fixed(ackSeconds, 2)) s") }
            if t.delivered > 0 {
                throughput.append("\(Self.group(Int(deliveryThroughput.rounded()))) delivered/s over \(Self.fixed(deliverySeconds, 2)) s")
            }
            lines.append("throughput " + (throughput.isEmpty ? "-" : throughput.joined(separator: ", ")))
            lines.append("latency (ms)          p50      p90      p99    p99.9      max")
            if ackLatency.count > 0 { lines.append(Self.latencyLine(ackLabel, ackLatency)) }
            if deliveryLatency.count > 0 { lines.append(Self.latencyLine(deliveryLabel, deliveryLatency)) }
        }
        if let f = connectionFigures {
            lines.append("connected  \(f.connected) of \(f.requested) in \(Self.fixed(f.connectSeconds, 2)) s "
                         + "(\(Self.group(Int(f.connectRate.rounded()))) connections/s)" + (f.failed > 0 ? ", \(f.failed) failed" : ""))
            if let per = f.rssPerConnectionBytes, let before = f.rssBeforeBytes, let after = f.rssAfterBytes {
                lines.append("server RSS \(Self.mib(before)) → \(Self.mib(after)): \(Self.fixed(per / 1024, 1)) KiB per connection")
            }
            if let cpu = f.cpuSeconds, f.connected > 0 {
                lines.append("server CPU \(Self.fixed(cpu, 2)) s to accept them (\(Self.fixed(cpu / Double(f.connected) * 1000, 3)) ms per connection)")
            }
            if let e = f.firstError { lines.append("first error: \(e)") }
        }
        if let u = usage {
            var line = "server pid \(u.pid): CPU \(Self.fixed(u.cpuSeconds, 2)) s"
            if let per = cpuPer1000 { line += ", \(Self.fixed(per, 4)) s per 1000 delivered" }
            line += "; RSS peak \(Self.mib(u.rssPeakBytes)) (VmHWM \(Self.mib(u.vmHWMBytes)))"
            if u.includesGenerator { line += " [embedded: includes the generator]" }
            lines.append(line)
        }
        if let g = generatorCPUSeconds { lines.append("generator  CPU \(Self.fixed(g, 2)) s") }
        for n in notes { lines.append("note: \(n)") }
        return lines.joined(separator: "\n")
    }

    static func latencyLine(_ label: String, _ s: LatencySummary) -> String {
        var line = label.padding(16)
        for v in [s.p50, s.p90, s.p99, s.p999, s.max] {
            line += fixed(Double(v) / 1000, 3).leftPadded(9)
        }
        return line
    }

    public static func fixed(_ v: Double, _ places: Int) -> String {
        guard v.isFinite else { return "-" }
        var f = 1.0
        for _ in 0..<places { f *= 10 }
        let scaled = (abs(v) * f).rounded()
        let whole = Int(scaled / f)
        let frac = Int(scaled - Double(whole) * f)
        var s = (v < 0 && scaled > 0 ? "-" : "") + String(whole)
        if places > 0 {
            var digits = String(frac)
            while digits.count < places { digits = "0" + digits }
            s += "." + digits
        }
        return s
    }

    /// 1234567 → "1,234,567".
    public static func group(_ v: Int) -> String {
        let digits = String(abs(v))
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return (v < 0 ? "-" : "") + out
    }

    static func mib(_ bytes: Int) -> String { fixed(Double(bytes) / 1_048_576, 1) + " MiB" }
}

extension String {
    func padding(_ width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }

    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

/// The live progress line: on a terminal only (stderr), rewritten in place; nothing on a pipe.
public final class ProgressLine: Sendable {
    public let enabled: Bool

    public init(enabled: Bool = isatty(STDERR_FILENO) != 0) {
        self.enabled = enabled
    }

    public func update(_ text: String) {
        guard enabled else { return }
        write("\r\u{1B}[2K" + text)
    }

    public func finish() {
        guard enabled else { return }
        write("\r\u{1B}[2K")
    }

    private func write(_ s: String) {
        var s = s
        #if canImport(Glibc)
        s.withUTF8 { _ = Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
        #else
        s.withUTF8 { _ = Darwin.write(STDERR_FILENO, $0.baseAddress, $0.count) }
        #endif
    }
}
