/// FCM's throttling of collapsible messages (firebase.google.com/docs/cloud-messaging/throttling-and-quotas):
/// a burst of 20 per app per device, then one message back every 3 minutes. Past it messages are held
/// back rather than refused (GCM's advanced guide: a "pending queue" until new tokens come), and a
/// newer one with the same collapse key replaces the one held. `serve --collapsible-throttle fcm` (those numbers)
/// or `BURST,1/PERIOD`; off unless given (docs/semantics.md, "Collapsible-message throttling").
public struct CollapsibleThrottleRate: Sendable, Equatable, CustomStringConvertible {
    /// Collapsible messages a device may take at once (1 to 1,000).
    public let burst: Int
    /// One message back every this many milliseconds (1 second to 1 day).
    public let refillMillis: Int64

    public static let maximumBurst = 1000
    public static let fcm = CollapsibleThrottleRate(burst: 20, refillMillis: 180_000)!

    public init?(burst: Int, refillMillis: Int64) {
        guard (1...Self.maximumBurst).contains(burst), (1000...MessageRate.maximumPeriodMillis).contains(refillMillis) else { return nil }
        self.burst = burst
        self.refillMillis = refillMillis
    }

    /// `fcm`, or `BURST,1/PERIOD` with PERIOD as `--device-message-rate` writes it (`10s`, `3min`, `1h`).
    public init?(parsing text: String) {
        if text == "fcm" {
            self = .fcm
            return
        }
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].utf8.count <= 4, let burst = Int(parts[0]), parts[1].hasPrefix("1/"),
              let window = MessageRate(parsing: String(parts[1]), fcm: nil), window.windows.count == 1,
              let rate = CollapsibleThrottleRate(burst: burst, refillMillis: window.windows[0].periodMillis) else { return nil }
        self = rate
    }

    public var description: String {
        let window = MessageRate(windows: [MessageRate.Window(limit: 1, periodMillis: refillMillis)!])
        return "\(burst),\(window)"
    }
}

/// The throttle's state: one token bucket per device (registration token), and the collapsible
/// messages it holds back, the newest per collapse key. A value, and a pure function of the times it is
/// given (the engine's clock, so a virtual clock's advance refills it): the engine consults it when it
/// is about to hand a collapsible message to a connected device, and hands held messages over when
/// `due` says their device has room again.
///
/// Invariants: a bucket holds 0 … `burst` messages; a full bucket is not kept (a device never seen, or
/// refilled to the brim, starts full); a device is in `held` only with at least one message.
public struct CollapsibleThrottle: Sendable {
    public let rate: CollapsibleThrottleRate

    package struct Bucket: Equatable {
        /// Messages the device may take now.
        package var level: Int
        /// When `level` was last brought up to date (the refill counts whole periods from here).
        package var atMillis: Int64
    }

    package private(set) var buckets: [String: Bucket] = [:]
    /// Device → collapse key → the device message id held back under that key.
    package private(set) var held: [String: [String: String]] = [:]

    public init(rate: CollapsibleThrottleRate) { self.rate = rate }

    /// Whether `token` may take one collapsible message at `now`; if so it is counted.
    public mutating func admit(_ token: String, now: Int64) -> Bool {
        var bucket = refilled(token, now: now)
        guard bucket.level > 0 else {
            buckets[token] = bucket
            return false
        }
        bucket.level -= 1
        buckets[token] = bucket
        return true
    }

    /// Notes that `id` (collapse key `key`) is held back for `token`. True when it was not held
    /// already: the caller journals it once (a message is offered again after each read of the queue).
    public mutating func hold(_ token: String, collapseKey key: String, id: String) -> Bool {
        held[token, default: [:]].updateValue(id, forKey: key) != id
    }

    /// `id` went to the device (or the device left): it is no longer held.
    public mutating func release(_ token: String, collapseKey key: String) {
        held[token]?.removeValue(forKey: key)
        if held[token]?.isEmpty == true { held.removeValue(forKey: token) }
    }

    /// After a read of the device's queue: what it no longer holds (collapsed, expired) is not held.
    public mutating func keep(_ token: String, ids: Set<String>) {
        guard let keys = held[token] else { return }
        let kept = keys.filter { ids.contains($0.value) }
        held[token] = kept.isEmpty ? nil : kept
    }

    /// The device left: what it held waits in the store as any stored message, not throttled.
    public mutating func forget(_ token: String) {
        held.removeValue(forKey: token)
    }

    public func heldIDs(_ token: String) -> [String] {
        held[token].map { Array($0.values) } ?? []
    }

    /// Devices holding messages whose bucket has room at `now`: the engine reads their queues again.
    public func due(now: Int64) -> [String] {
        held.keys.filter { refilled($0, now: now).level > 0 }
    }

    /// When `token` next gets a message back (nil: its bucket is full).
    public func nextRefillMillis(_ token: String, now: Int64) -> Int64? {
        let bucket = refilled(token, now: now)
        return bucket.level >= rate.burst ? nil : bucket.atMillis + rate.refillMillis
    }

    package func refilled(_ token: String, now: Int64) -> Bucket {
        guard var bucket = buckets[token] else { return Bucket(level: rate.burst, atMillis: now) }
        // A clock read that went backwards (never the virtual clock) refills nothing.
        let elapsed = max(0, now - bucket.atMillis)
        let periods = elapsed / rate.refillMillis
        if bucket.level + Int(min(periods, Int64(rate.burst))) >= rate.burst {
            return Bucket(level: rate.burst, atMillis: now)
        }
        bucket.level += Int(periods)
        bucket.atMillis += periods * rate.refillMillis
        return bucket
    }

    /// Drops buckets that are full again at `now` (they equal a fresh one): memory stays bounded by the
    /// devices throttled within the last `burst` refills.
    public mutating func prune(now: Int64) {
        buckets = buckets.filter { token, _ in refilled(token, now: now).level < rate.burst || held[token] != nil }
    }
}
