#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization

/// Gives memory freed by idle connections back to the system. glibc keeps freed chunks inside its
/// heaps, so the parsers that thousands of connections release when they go quiet would stay
/// resident; `malloc_trim` returns the whole free pages among them. Called from a periodic tick; does
/// the work off the event loops, and only after enough parsers were released to make it worth it.
public final class MemoryTrimmer: Sendable {
    private let lastSeen = Atomic<Int>(0)
    private let running = Atomic<Bool>(false)
    /// Released parsers (several KiB each) that make a trim worthwhile.
    public let threshold: Int

    public init(threshold: Int = 256) {
        self.threshold = threshold
    }

    /// glibc's `malloc_trim` (not in the Glibc module map), looked up once.
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        #if canImport(Glibc)
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        #else
        return nil
        #endif
    }()

    public func tick() {
        let released = XMPPConnectionHandler.parsersReleased.load(ordering: .relaxed)
        guard released - lastSeen.load(ordering: .relaxed) >= threshold,
              running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        lastSeen.store(released, ordering: .relaxed)
        DispatchQueue.global(qos: .utility).async { [self] in
            // The result only says whether memory was released; there is nothing to do either way.
            _ = MemoryTrimmer.mallocTrim?(0)
            running.store(false, ordering: .releasing)
        }
    }
}
