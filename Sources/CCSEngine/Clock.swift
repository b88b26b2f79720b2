import Foundation
import Synchronization

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
    private let micros: Mutex<Int64>

    public init(startMillis: Int64) {
        micros = Mutex(startMillis * 1000)
    }

    public func nowMillis() -> Int64 { micros.withLock { $0 / 1000 } }

    /// Strictly increasing between calls, so ids made from it stay unique while time stands still.
    public func nowMicros() -> Int64 { micros.withLock { $0 } }

    @discardableResult
    public func advance(byMillis ms: Int64) -> Int64 {
        micros.withLock { $0 += max(0, ms) * 1000; return $0 / 1000 }
    }
}
