import Foundation
import Synchronization

/// Batches writes into few transactions, so that durability does not cost throughput.
///
/// Callers submit ops with a completion; one writer thread takes everything submitted so far, applies it
/// in a single transaction and then runs the completions in submission order. A completion therefore
/// runs only after its ops are committed: that is the rule the engine relies on to ACK after commit.
/// Reads submitted with `afterPendingWrites` run on the same thread after every write submitted before
/// them, which gives callers a consistent cut (a device's queue as of its connection).
public final class GroupCommitter: Sendable {
    public typealias Completion = @Sendable (Error?) -> Void

    private enum Item: Sendable {
        case write([StoreOp], Completion?)
        case read(@Sendable () -> Void)
        case stop(@Sendable () -> Void)
    }

    private struct State {
        var items: [Item] = []
        var stopped = false
        var batches = 0
        var committedOps = 0
    }

    public let store: Store
    /// Most ops per transaction: a bound on the latency a huge burst adds to the first of them.
    public let maxBatch: Int
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)

    public init(store: Store, maxBatch: Int = 4096) {
        self.store = store
        self.maxBatch = maxBatch
        let thread = Thread { [self] in self.run() }
        thread.name = "ccs-store-writer"
        thread.start()
    }

    /// Figures for metrics: transactions committed and ops in them.
    public var statistics: (batches: Int, ops: Int) {
        state.withLock { ($0.batches, $0.committedOps) }
    }

    public func submit(_ ops: [StoreOp], completion: Completion? = nil) {
        let accepted = state.withLock { s -> Bool in
            if s.stopped { return false }
            s.items.append(.write(ops, completion))
            return true
        }
        if accepted { wake.signal() } else { completion?(StoreStopped()) }
    }

    public func submit(_ op: StoreOp, completion: Completion? = nil) {
        submit([op], completion: completion)
    }

    /// Runs `body` on the writer thread once every write submitted before it is committed.
    public func afterPendingWrites(_ body: @escaping @Sendable () -> Void) {
        let accepted = state.withLock { s -> Bool in
            if s.stopped { return false }
            s.items.append(.read(body))
            return true
        }
        if accepted { wake.signal() } else { body() }
    }

    /// Commits everything submitted so far, then stops accepting work.
    public func shutdown() async {
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
            let accepted = state.withLock { s -> Bool in
                if s.stopped { return false }
                s.items.append(.stop({ cont.resume() }))
                s.stopped = true
                return true
            }
            if accepted { wake.signal() } else { cont.resume() }
        }
    }

    private func run() {
        while true {
            wake.wait()
            let items = state.withLock { s -> [Item] in
                let taken = s.items
                s.items.removeAll(keepingCapacity: true)
                return taken
            }
            if items.isEmpty { continue }
            var batch: [StoreOp] = []
            var completions: [Completion?] = []
            func flush() {
                if completions.isEmpty { return }
                var failure: Error?
                do { try store.apply(batch) } catch { failure = error }
                let n = batch.count
                state.withLock { $0.batches += 1; $0.committedOps += n }
                for c in completions { c?(failure) }
                batch.removeAll(keepingCapacity: true)
                completions.removeAll(keepingCapacity: true)
            }
            for item in items {
                switch item {
                case .write(let ops, let completion):
                    if batch.count + ops.count > maxBatch { flush() }
                    batch.append(contentsOf: ops)
                    completions.append(completion)
                case .read(let body):
                    flush()
                    body()
                case .stop(let done):
                    flush()
                    done()
                    return
                }
            }
            flush()
        }
    }
}

public struct StoreStopped: Error, CustomStringConvertible {
    public var description: String { "the store is shutting down" }
}
