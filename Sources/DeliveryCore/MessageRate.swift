/// A limit on messages as FCM states its limits, a set of windows, each a limit per period ("these
/// minutes are not aligned to the clock"): the messages one device may be sent (`serve
/// --device-message-rate`; FCM: 240 a minute and 5,000 an hour on Android), those one project may
/// send over HTTP v1 (`--project-message-rate`; FCM: 600,000 a minute), and those one sender may send
/// to one topic (`--topic-message-rate`; FCM publishes no number). All off unless given
/// (docs/semantics.md, "Rate limits").
public struct MessageRate: Sendable, Equatable, CustomStringConvertible {
    public struct Window: Sendable, Equatable {
        /// Messages allowed per period (1 to 1,000,000).
        public let limit: Int
        /// The period in milliseconds (1 second to 1 day).
        public let periodMillis: Int64

        public init?(limit: Int, periodMillis: Int64) {
            guard (1...MessageRate.maximumLimit).contains(limit),
                  (1000...MessageRate.maximumPeriodMillis).contains(periodMillis) else { return nil }
            self.limit = limit
            self.periodMillis = periodMillis
        }
    }

    public let windows: [Window]

    public static let maximumLimit = 1_000_000
    public static let maximumPeriodMillis: Int64 = 86_400_000
    public static let maximumWindows = 4

    /// The numbers of FCM's documentation (firebase.google.com/docs/cloud-messaging/throttling-and-quotas):
    /// per device,
    public static let fcm = MessageRate(windows: [Window(limit: 240, periodMillis: 60_000)!,
                                                  Window(limit: 5000, periodMillis: 3_600_000)!])
    /// and per project for HTTP v1.
    public static let fcmProject = MessageRate(windows: [Window(limit: 600_000, periodMillis: 60_000)!])

    public init(windows: [Window]) { self.windows = windows }

    /// `fcm` (the limit `fcm` names, where FCM publishes one), or windows separated by commas, each
    /// `LIMIT/PERIOD` with PERIOD a unit (`s`, `min`, `h`, `d`) with an optional count before it:
    /// `240/min,5000/h`, `3/10s`. Nil for anything else.
    public init?(parsing text: String, fcm: MessageRate? = .fcm) {
        if text == "fcm" {
            guard let fcm else { return nil }
            self = fcm
            return
        }
        var windows: [Window] = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = item.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0].utf8.count <= 7, let limit = Int(parts[0]),
                  let period = Self.periodMillis(parts[1]), let window = Window(limit: limit, periodMillis: period)
            else { return nil }
            windows.append(window)
        }
        guard !windows.isEmpty, windows.count <= Self.maximumWindows else { return nil }
        self.windows = windows
    }

    private static let units: [(String, Int64)] = [("min", 60_000), ("s", 1000), ("h", 3_600_000), ("d", 86_400_000)]

    private static func periodMillis(_ text: Substring) -> Int64? {
        for (unit, millis) in units where text.hasSuffix(unit) {
            let count = text.dropLast(unit.count)
            if count.isEmpty { return millis }
            guard count.utf8.count <= 5, count.utf8.allSatisfy({ (48...57).contains($0) }), let n = Int64(count), n > 0 else {
                return nil
            }
            return n * millis
        }
        return nil
    }

    public var description: String {
        windows.map { w in
            for (unit, millis) in Self.units.sorted(by: { $0.1 > $1.1 }) where w.periodMillis % millis == 0 {
                let n = w.periodMillis / millis
                return "\(w.limit)/\(n == 1 ? "" : String(n))\(unit)"
            }
            return "\(w.limit)/\(w.periodMillis / 1000)s"
        }.joined(separator: ",")
    }
}

/// One token bucket per window and key (a device, a project, a sender's topic): a window of L messages per P ms holds
/// up to L·P units, gains L units a millisecond and a message costs P (whole numbers: no drift, and a
/// virtual clock advanced by P refills it exactly). Kept in memory only: a restart starts afresh.
public struct RateLimiter: Sendable {
    public let rate: MessageRate
    private var levels: [String: Levels] = [:]
    private var admitsSincePrune = 0

    private struct Levels {
        package var units: [Int64]
        package var atMillis: Int64
    }

    public init(rate: MessageRate) { self.rate = rate }

    package var trackedKeys: Int { levels.count }

    /// Takes one message for `key` at `now`: nil when every window has room (the message is counted),
    /// else the milliseconds until every window will (nothing is counted).
    public mutating func admit(_ key: String, now: Int64) -> Int64? {
        notePrune(now: now)
        var entry = refilled(levels[key], now: now)
        let wait = waitMillis(entry)
        if wait == 0 { take(&entry) }
        levels[key] = entry
        return wait > 0 ? wait : nil
    }

    /// Takes one message for each of `keys` (a condition's topics) at `now`, all or none: nil when
    /// every key's windows have room (each is counted once), else the milliseconds until all of them
    /// will (nothing is counted).
    public mutating func admit(_ keys: [String], now: Int64) -> Int64? {
        notePrune(now: now)
        var entries: [(key: String, levels: Levels)] = []
        for key in keys where !entries.contains(where: { $0.key == key }) {
            entries.append((key, refilled(levels[key], now: now)))
        }
        let wait = entries.map { waitMillis($0.levels) }.max() ?? 0
        for (key, var entry) in entries {
            if wait == 0 { take(&entry) }
            levels[key] = entry
        }
        return wait > 0 ? wait : nil
    }

    /// Milliseconds until every window of `entry` has room for a message; 0: it has now.
    private func waitMillis(_ entry: Levels) -> Int64 {
        var wait: Int64 = 0
        for (i, window) in rate.windows.enumerated() where entry.units[i] < window.periodMillis {
            let missing = window.periodMillis - entry.units[i]
            wait = max(wait, (missing + Int64(window.limit) - 1) / Int64(window.limit))
        }
        return wait
    }

    private func take(_ entry: inout Levels) {
        for (i, window) in rate.windows.enumerated() { entry.units[i] -= window.periodMillis }
    }

    private mutating func notePrune(now: Int64) {
        admitsSincePrune += 1
        if admitsSincePrune >= Self.pruneEvery { prune(now: now) }
    }

    private func refilled(_ entry: Levels?, now: Int64) -> Levels {
        guard var entry else {
            return Levels(units: rate.windows.map { Int64($0.limit) * $0.periodMillis }, atMillis: now)
        }
        // A clock set back refills nothing; the bucket's time stays where it was.
        let elapsed = max(0, now - entry.atMillis)
        for (i, window) in rate.windows.enumerated() {
            let capacity = Int64(window.limit) * window.periodMillis
            // elapsed × limit overflows only after about 292 years at the largest limit.
            let gained = elapsed >= window.periodMillis ? capacity : elapsed * Int64(window.limit)
            entry.units[i] = min(capacity, entry.units[i] + gained)
        }
        entry.atMillis = max(entry.atMillis, now)
        return entry
    }

    package static let pruneEvery = 4096

    /// Drops the keys whose buckets are full again: they hold nothing a fresh entry would not.
    private mutating func prune(now: Int64) {
        admitsSincePrune = 0
        let windows = rate.windows
        levels = levels.filter { _, entry in
            let elapsed = max(0, now - entry.atMillis)
            return windows.enumerated().contains { i, w in
                elapsed < w.periodMillis && entry.units[i] + elapsed * Int64(w.limit) < Int64(w.limit) * w.periodMillis
            }
        }
    }
}
