#if canImport(Glibc)
import Glibc
#endif
import Testing
import XMPPServer

/// The fixed mmap threshold: after a big buffer is freed, a smaller big one still gets its own
/// mapping (glibc's dynamic threshold would have put it inside a malloc heap, to stay there).
@Suite struct MallocTuningTests {
    #if canImport(Glibc) && !TSAN_VISIBLE_LOCKS
    /// glibc marks a chunk it mapped by itself with bit 1 (IS_MMAPPED) of the size word before it.
    private static func isMapped(_ pointer: UnsafeMutableRawPointer) -> Bool {
        (pointer.load(fromByteOffset: -MemoryLayout<Int>.size, as: UInt.self) & 2) != 0
    }

    @Test func aBigBufferIsMappedEvenAfterABiggerOneWasFreed() throws {
        #expect(MallocTuning.apply())
        // 30 MiB freed: without the fixed threshold, glibc raises it to 30 MiB here, and the next
        // 20 MiB come out of a malloc heap. (Big enough that no free chunk of the heaps, which other
        // tests share, can serve it: glibc looks there before it maps.)
        let big = try #require(malloc(30 << 20))
        #expect(Self.isMapped(big))
        free(big)
        let next = try #require(malloc(20 << 20))
        defer { free(next) }
        #expect(Self.isMapped(next))
    }
    #endif
}
