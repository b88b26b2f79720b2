import DeliveryCore
import Foundation
import Locking

/// The one source of time for the engine. Domain code never calls `Date()`.
public protocol EngineClock: Sendable {
    /// Milliseconds since the Unix epoch.
    func nowMillis() -> Int64
    /// Microseconds since the Unix epoch (FCM message ids carry microseconds).
    func nowMicros() -> Int64
}

public struct WallClock: EngineClock {
    public init() {}
    public func nowMillis() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }
    public func nowMicros() -> Int64 { Int64((Date().timeIntervalSince1970 * 1_000_000).rounded(.down)) }
}

/// A clock that moves only when told to, so that a test of a 4-week TTL runs in milliseconds.
public final class VirtualClock: EngineClock {
    private let micros: Locked<Int64>

    public init(startMillis: Int64) {
        micros = Locked(startMillis * 1000)
    }

    public func nowMillis() -> Int64 { micros.withLock { $0 / 1000 } }

    /// Strictly increasing between calls, so ids made from it stay unique while time stands still.
    public func nowMicros() -> Int64 { micros.withLock { $0 } }

    /// The latest time the clock can show: the end of year 9999 (every stored time, `now + TTL`
    /// included, stays far from Int64's limit).
    public static let maximumMillis: Int64 = 253_402_300_799_999

    /// Moves the clock forward to `millis` if it is behind it (another node's advance); false if it
    /// was not behind, or `millis` is past `maximumMillis`.
    @discardableResult
    public func advance(toMillis millis: Int64) -> Bool {
        micros.withLock { now in
            guard millis <= Self.maximumMillis, millis * 1000 > now else { return false }
            now = millis * 1000
            return true
        }
    }

    /// Moves the clock forward; nil (and no move) when that would pass `maximumMillis`.
    @discardableResult
    public func advance(byMillis ms: Int64) -> Int64? {
        micros.withLock { now in
            let step = max(0, ms)
            guard step <= Self.maximumMillis - now / 1000 else { return nil }
            now += step * 1000
            return now / 1000
        }
    }
}
