import Dispatch

/// The group committer's time source: when a write was submitted, when a cancellable write's delay
/// is over, how long a transaction took. Injected so that its tests drive time themselves (a manual
/// clock the test advances) instead of sleeping through the delays they test.
public protocol CommitterClock: Sendable {
    /// Now, in nanoseconds on a monotonic timeline of the clock's own.
    func nowNanoseconds() -> UInt64

    /// Blocks the writer thread until `deadline` (on this clock's timeline) has come or `wake` is
    /// signalled, whichever is first. A signal that arrives after the return stays in `wake`: the
    /// writer's next wait then returns at once, and it looks for work again (harmless).
    func sleep(until deadline: UInt64, orUntil wake: DispatchSemaphore)
}

/// The wall clock: the uptime clock of `DispatchTime` (monotonic, not moved by time-of-day changes).
public struct UptimeCommitterClock: CommitterClock {
    public init() {}

    public func nowNanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    public func sleep(until deadline: UInt64, orUntil wake: DispatchSemaphore) {
        guard deadline > nowNanoseconds() else { return }
        _ = wake.wait(timeout: DispatchTime(uptimeNanoseconds: deadline))
    }
}
