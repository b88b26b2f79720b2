#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// CPU time and memory of a process on this machine, from /proc (Linux). CPU seconds per message is the
/// figure to compare on a shared, noisy machine: wall-clock throughput moves with the neighbours, the
/// work the server does per message does not.
public struct ProcessSampler: Sendable {
    public struct Sample: Sendable, Equatable {
        /// User + system CPU seconds since the process started.
        public var cpuSeconds: Double
        public var rssBytes: Int
        /// The kernel's high-water mark of the resident set (VmHWM).
        public var peakRSSBytes: Int
    }

    public let pid: Int32

    public init(pid: Int32) { self.pid = pid }

    public static var current: ProcessSampler { ProcessSampler(pid: getpid()) }

    public var exists: Bool { Self.read("/proc/\(pid)/stat") != nil }

    public func sample() -> Sample? {
        guard let stat = Self.read("/proc/\(pid)/stat"), let status = Self.read("/proc/\(pid)/status"),
              let cpu = Self.cpuSeconds(stat: stat) else { return nil }
        return Sample(cpuSeconds: cpu, rssBytes: Self.statusKiB(status, "VmRSS:") * 1024,
                      peakRSSBytes: Self.statusKiB(status, "VmHWM:") * 1024)
    }

    /// utime + stime (fields 14 and 15 of /proc/PID/stat), counted after the `)` that ends the command
    /// name, which may itself hold spaces and parentheses.
    static func cpuSeconds(stat: String) -> Double? {
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state); utime is field 14, stime field 15.
        guard fields.count > 12, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return (utime + stime) / (ticks > 0 ? ticks : 100)
    }

    static func statusKiB(_ status: String, _ key: String) -> Int {
        for line in status.split(separator: "\n") where line.hasPrefix(key) {
            let digits = line.dropFirst(key.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? ""
            return Int(digits) ?? 0
        }
        return 0
    }

    static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, 4096) }
            if n <= 0 { break }
            out.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Raises the soft open-files limit to the hard one (thousands of connections need it).
    public static func raiseOpenFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        return Int(limit.rlim_cur)
    }
}

/// The machine the figures come from, for reports.
public enum MachineDescription {
    public static func current() -> String {
        var parts: [String] = []
        if let cpuinfo = ProcessSampler.read("/proc/cpuinfo") {
            let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
                .map { $0.split(separator: ":", maxSplits: 1).last.map { String($0).trimmingSpaces } ?? "" }
            if let model, !model.isEmpty { parts.append(model) }
        }
        parts.append("\(sysconf(Int32(_SC_NPROCESSORS_ONLN))) CPUs")
        if let meminfo = ProcessSampler.read("/proc/meminfo") {
            let kib = ProcessSampler.statusKiB(meminfo, "MemTotal:")
            if kib > 0 { parts.append("\(kib / 1024 / 1024 + (kib / 1024 % 1024 >= 512 ? 1 : 0)) GiB RAM") }
        }
        var u = utsname()
        uname(&u)
        let release = withUnsafeBytes(of: &u.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        parts.append("Linux \(release)")
        return parts.joined(separator: ", ")
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\n" { s.removeLast() }
        return String(s)
    }
}
