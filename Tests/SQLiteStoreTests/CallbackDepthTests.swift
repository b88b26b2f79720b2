import StoreModel
import Locking
import Testing

/// The observers behind the store's and the committer's locks are called at the same stack depth
/// however many transactions went before. A function held as a lock's bare `Value` came back from
/// every `withLock { $0 }` inside two more reabstraction thunks: the chain grew by every transaction
/// and overflowed the writer's stack after about an hour of soak traffic (docs/hardening.md).
@Suite struct CallbackDepthTests {
    /// Where this call's frame sits on the stack (a local's address).
    @inline(never) static func stackPosition() -> UInt {
        var local = 0
        return withUnsafeMutablePointer(to: &local) { UInt(bitPattern: $0) }
    }

    /// The stack positions seen by `record` at the 10th and the last of `n` calls.
    final class Depths: Sendable {
        let n: Int
        private let state = Locked<(calls: Int, early: UInt, late: UInt)>((0, 0, 0))
        init(n: Int) { self.n = n }
        func record() {
            let here = CallbackDepthTests.stackPosition()
            state.withLock { s in
                s.calls += 1
                if s.calls == 10 { s.early = here }
                if s.calls == n { s.late = here }
            }
        }
        var calls: Int { state.withLock { $0.calls } }
        /// How much deeper the last call ran than the 10th (the stack grows down).
        var growth: Int { state.withLock { Int(bitPattern: $0.early) - Int(bitPattern: $0.late) } }
    }

    /// 2 thunk frames per read would put call 1,000 about 100 KiB deeper than call 10.
    static let allowedGrowth = 4096

    @Test func theCommittersObserversRunAtTheSameDepthAfterAThousandBatches() async throws {
        let committer = GroupCommitter(store: try temporaryStore(), clock: ManualCommitterClock())
        let n = 1000
        let batches = Depths(n: n), after = Depths(n: n)
        committer.observeBatches { _, _ in batches.record() }
        committer.afterEachBatch { after.record() }
        for i in 0..<n {
            // One at a time, so that each write is a transaction of its own.
            await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
                committer.submit(.enqueue(message("t", "m\(i)"), limits: nil)) { _ in cont.resume() }
            }
        }
        await committer.shutdown()
        #expect(batches.calls == n)
        #expect(after.calls >= n)
        #expect(batches.growth < Self.allowedGrowth)
        #expect(after.growth < Self.allowedGrowth)
    }

    @Test func theStoresObserverAndFailurePredicateRunAtTheSameDepthAfterAThousandCommits() throws {
        let store = try temporaryStore()
        let n = 1000
        let removals = Depths(n: n), predicate = Depths(n: n)
        store.observeRemovals { _ in removals.record() }
        store.injectFailures { _ in
            predicate.record()
            return false
        }
        // Each message collapses the one before: every commit after the first reports a removal.
        for i in 0...n {
            try store.apply([.enqueue(message("t", "m\(i)", collapseKey: "k"), limits: nil)])
        }
        #expect(removals.calls == n)
        #expect(predicate.calls == n + 1)
        #expect(removals.growth < Self.allowedGrowth)
        #expect(predicate.growth < Self.allowedGrowth)
    }
}
