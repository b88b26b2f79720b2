// The emulator's one lock type. In every normal build it is the standard library's
// `Synchronization.Mutex`, with no cost over using it directly.
//
// Why the indirection: on Linux that Mutex is built on futexes inside the prebuilt standard library,
// which Thread Sanitizer does not instrument, so TSan reports every access to state a Mutex guards as a
// race. `scripts/tsan` builds with `-D TSAN_VISIBLE_LOCKS`, which swaps in a pthread mutex that TSan
// intercepts; its reports are then about real races (docs/hardening.md, "Thread Sanitizer").
//
// Never make a function type (or an optional one) the Value: read back through `withLock`'s inout,
// it comes back inside two more reabstraction thunks every time, a chain that grows with each read
// until calling it overflows the stack (docs/hardening.md, "Soak"). Hold it in a struct instead;
// `scripts/test` refuses the bare form.

#if TSAN_VISIBLE_LOCKS
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a pthread mutex: `Synchronization.Mutex`'s API, for Thread Sanitizer builds.
public final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ initialValue: consuming sending Value) {
        value = initialValue
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
#else
import Synchronization

/// A value guarded by a lock (`Synchronization.Mutex` in normal builds; see the note at the top).
public typealias Locked<Value> = Mutex<Value>
#endif
