#if canImport(Glibc)
import Glibc
#endif

/// glibc malloc settings for a long-running server process.
///
/// glibc serves a large allocation (128 KiB and up) with its own `mmap`, and gives it back to the
/// system on `free`; but each such free raises that threshold to the freed size (up to 32 MiB). One
/// burst of big buffers (a topic's 20,000 queued messages discarded at once makes journal batches and
/// result arrays of several MiB) then moves every later buffer of that size into the malloc heaps,
/// where freed holes stay resident, and raises the trim threshold to twice that, so up to 64 MiB free
/// at a heap's top is kept too. A fixed threshold stops both: a big buffer that no free chunk of a
/// heap can hold gets its own mapping again, and free memory at a heap's top past 128 KiB goes back.
public enum MallocTuning {
    /// `M_MMAP_THRESHOLD` in glibc's malloc.h.
    private static let mmapThresholdParameter: Int32 = -3
    /// The bytes from which an allocation gets its own mapping: glibc's own starting value.
    public static let mmapThreshold: Int32 = 128 * 1024

    /// Fixes the mmap threshold; returns whether glibc took it (false where malloc is not glibc's).
    @discardableResult
    public static func apply() -> Bool {
        #if canImport(Glibc)
        // `mallopt` is not in the Glibc module map (like `malloc_trim`, see MemoryTrimmer).
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "mallopt") else { return false }
        let mallopt = unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
        return mallopt(mmapThresholdParameter, mmapThreshold) == 1
        #else
        return false
        #endif
    }
}
