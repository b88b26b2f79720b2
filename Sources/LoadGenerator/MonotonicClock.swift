#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Monotonic nanoseconds. Every timestamp the generator puts into a payload comes from here, so
/// send→device latency is valid only when sender and receiver run in the same process (they do).
public enum MonotonicClock {
    @inline(__always)
    public static func nanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// Wall-clock milliseconds: for what is judged on the emulator's clock (a VAPID token's `exp`),
    /// which is the wall's unless virtual.
    public static func wallMillis() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) &* 1000 &+ UInt64(ts.tv_nsec) / 1_000_000
    }
}
