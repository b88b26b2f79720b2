import Foundation
import Locking

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
        /// `at`: when it was submitted (uptime nanoseconds), for ticketed writes only.
        case write([StoreOp], Completion?, WriteTicket?, at: UInt64, urgent: Bool)
        case read(@Sendable () -> Void)
        case stop(@Sendable () -> Void)

        /// Someone waits for it: cancellable writes ahead of it are written now rather than after
        /// their delay (order is kept, so it could not go before them).
        var isUrgent: Bool {
            switch self {
            case .write(_, _, _, _, let urgent): return urgent
            case .read, .stop: return true
            }
        }
    }

    private struct State {
        var items: [Item] = []
        var stopped = false
        /// The writer waits for work with no deadline: the next submission must wake it. While it is
        /// busy or waiting out a cancellable write's delay, submissions need not signal (one futex
        /// wake per idle period, not one per message).
        var writerIdle = false
        /// The writer waits out a cancellable write's delay: only an urgent submission wakes it.
        var writerDelaying = false
        var batches = 0
        var committedOps = 0
        var ticketedCommitted = 0
        var ticketedCalledOff = 0
    }

    public let store: any Persistence
    /// Most ops per transaction: a bound on the latency a huge burst adds to the first of them.
    public let maxBatch: Int
    /// How long a cancellable (ticketed) write waits before it is written, so that it can still be
    /// called off. Writes behind it wait too (order is kept). Zero: written as soon as the writer is free.
    public let cancellableDelayNanos: UInt64
    private let state = Locked(State())
    /// Told of every transaction: its ops and how long it took to commit (ns); for `/metrics`.
    private let batchObserver = Locked<BatchObserver?>(nil)

    /// The functions behind the locks are held in structs, never as a bare function type: a function
    /// value that is a lock's generic `Value`, read back through `withLock`'s inout, came back wrapped
    /// in two more reabstraction thunks on every read (Swift 6.x, optimized and debug builds alike).
    /// Read once per transaction, that chain grew by every batch until calling it overflowed the
    /// writer thread's stack: the soak's crash (docs/hardening.md). A struct is passed as it is.
    private struct BatchObserver: Sendable {
        let call: @Sendable (_ ops: Int, _ nanoseconds: UInt64) -> Void
    }

    private struct AfterCompletions: Sendable {
        let call: @Sendable () -> Void
    }

    public func observeBatches(_ observer: (@Sendable (_ ops: Int, _ nanoseconds: UInt64) -> Void)?) {
        batchObserver.withLock { $0 = observer.map(BatchObserver.init(call:)) }
    }

    /// Runs after each transaction's completions (on the writer thread): what its observers noted
    /// during the transaction can be reported after what the completions reported.
    private let afterCompletions = Locked<AfterCompletions?>(nil)

    public func afterEachBatch(_ body: (@Sendable () -> Void)?) {
        afterCompletions.withLock { $0 = body.map(AfterCompletions.init(call:)) }
    }
    private let wake = DispatchSemaphore(value: 0)

    /// Where the writer reports a failed batch (the engine's logger; stderr by default).
    private let logger: @Sendable (String) -> Void
    /// When writes were submitted, when their delay is over, how long a transaction took.
    private let clock: any CommitterClock

    /// `clock`: the uptime clock unless a test drives time itself.
    public init(store: any Persistence, maxBatch: Int = 4096, cancellableDelay: Duration = .zero,
                clock: any CommitterClock = UptimeCommitterClock(),
                logger: @escaping @Sendable (String) -> Void = { try? FileHandle.standardError.write(contentsOf: Data(("store: " + $0 + "\n").utf8)) }) {
        self.logger = logger
        self.clock = clock
        self.store = store
        self.maxBatch = maxBatch
        let (seconds, attos) = cancellableDelay.components
        self.cancellableDelayNanos = UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attos) / 1_000_000_000)
        let thread = Thread { [self] in self.run() }
        thread.name = "ccs-store-writer"
        thread.start()
    }

    public struct Statistics: Sendable, Equatable {
        /// Transactions committed, and the ops in them.
        public var batches: Int
        public var ops: Int
        /// Cancellable writes that were committed / called off before the writer took them.
        public var cancellableCommitted: Int
        public var cancellableCalledOff: Int
    }

    /// Figures for metrics and the admin API.
    public var statistics: Statistics {
        state.withLock {
            Statistics(batches: $0.batches, ops: $0.committedOps, cancellableCommitted: $0.ticketedCommitted,
                       cancellableCalledOff: $0.ticketedCalledOff)
        }
    }

    /// Queues `ops` for the next transaction. With a `ticket`, the write can still be called off
    /// (`WriteTicket.cancel()`) until the writer takes it; a cancelled write is never applied and its
    /// completion never runs.
    /// `urgent`: a caller waits for this commit (an admin request, a registration); cancellable writes
    /// queued before it are then written at once instead of after their delay.
    /// A completion never runs inside this call, on the submitting thread: once the committer has
    /// stopped, it runs later with `StoreStopped`, on a thread of the committer's (`refusals`). So a
    /// caller may submit inside a critical section whose lock its completion takes.
    public func submit(_ ops: [StoreOp], ticket: WriteTicket? = nil, urgent: Bool = false,
                       completion: Completion? = nil) {
        guard let ticket else {
            enqueue(.write(ops, completion, nil, at: 0, urgent: urgent), orElse: { completion?(StoreStopped()) })
            return
        }
        // The ticket holds the write until the writer takes it or the caller calls it off; the queue
        // holds only the ticket. A write called off is then released where it was called off (the
        // event loop that allocated it), not by the writer thread: freeing another thread's memory
        // took glibc's arena lock per block, and the loop waited on it (a tenth of its samples on the
        // APNs path, docs/benchmarks.md).
        ticket.hold(ops, completion)
        enqueue(.write([], nil, ticket, at: clock.nowNanoseconds(), urgent: urgent),
                orElse: { if let held = ticket.take() { held.completion?(StoreStopped()) } })
    }

    public func submit(_ op: StoreOp, completion: Completion? = nil) {
        submit([op], completion: completion)
    }

    /// Runs `body` on the writer thread once every write submitted before it is committed; once the
    /// committer has stopped, later on a thread of its own (never inside this call).
    public func afterPendingWrites(_ body: @escaping @Sendable () -> Void) {
        enqueue(.read(body), orElse: body)
    }

    /// Commits everything submitted so far, then stops accepting work.
    public func shutdown() async {
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
            enqueue(.stop({ cont.resume() }), orElse: { cont.resume() }, stopping: true)
        }
    }

    /// `shutdown` for callers that cannot await (a test harness's deinit): blocks until it is done.
    public func shutdownBlocking() {
        let done = DispatchSemaphore(value: 0)
        enqueue(.stop({ done.signal() }), orElse: { done.signal() }, stopping: true)
        done.wait()
    }

    /// What a stopped committer refuses runs here, in submission order, never on the submitting
    /// thread: the engine submits inside its critical sections with completions that take its lock,
    /// and one run inline there was a recursive acquire, which traps (issue 39).
    private let refusals = DispatchQueue(label: "ccs-store-refusals")

    private func enqueue(_ item: Item, orElse refused: @escaping @Sendable () -> Void, stopping: Bool = false) {
        let (accepted, signal) = state.withLock { s -> (Bool, Bool) in
            if s.stopped { return (false, false) }
            s.items.append(item)
            if stopping { s.stopped = true }
            let signal = s.writerIdle || (s.writerDelaying && item.isUrgent)
            if signal { s.writerIdle = false; s.writerDelaying = false }
            return (true, signal)
        }
        if signal { wake.signal() }
        if !accepted { refusals.async(execute: refused) }
    }

    /// The writer thread's batch being gathered: the ops, each item's completion and own ops, and
    /// what the statistics count of it.
    private struct Batch {
        var ops: [StoreOp] = []
        var completions: [Completion?] = []
        var itemOps: [[StoreOp]] = []    // each submitted item's own ops, for applying them one by one
        var ticketed = 0, calledOff = 0
        // Collapses already in `ops` with no message queued for their token since: another for the
        // same token and key would delete nothing. An online device's live deliveries each submit one
        // and their writes are mostly called off, so a batch held dozens per device (APNs: every one).
        var collapsed: [String: Set<String>] = [:]

        mutating func add(_ item: [StoreOp], _ completion: Completion?) {
            for op in item {
                switch op {
                case .collapse(let token, let key):
                    if collapsed[token]?.contains(key) == true { continue }
                    collapsed[token, default: []].insert(key)
                case .enqueue(let message, _):
                    if !collapsed.isEmpty { collapsed[message.token] = nil }
                case .fanOut:
                    collapsed.removeAll()
                default:
                    break
                }
                ops.append(op)
            }
            itemOps.append(item)
            completions.append(completion)
        }

        mutating func reset() {
            ops.removeAll(keepingCapacity: true)
            completions.removeAll(keepingCapacity: true)
            itemOps.removeAll(keepingCapacity: true)
            collapsed.removeAll()
            ticketed = 0; calledOff = 0
        }
    }

    /// The items the writer took from `state`, in submission order; handled from `head` on.
    private struct Queue {
        var items: [Item] = []
        var head = 0
        var lastUrgent = -1             // index in `items` of the newest urgent item (-1: none)

        mutating func take(_ submitted: [Item]) {
            for item in submitted {
                if item.isUrgent { lastUrgent = items.count }
                items.append(item)
            }
        }

        /// Handled items are dropped in bulk: removing them from the front each round moved every
        /// item still waiting out its delay (thousands under load) once per round.
        mutating func dropHandled() {
            if head == items.count {
                items.removeAll(keepingCapacity: true)
                lastUrgent -= head
                head = 0
            } else if head >= 1024, head * 2 >= items.count {
                items.removeFirst(head)
                lastUrgent -= head
                head = 0
            }
        }
    }

    private func run() {
        var queue = Queue()
        var batch = Batch()
        var deadline: UInt64? = nil     // when the first delayed cancellable write is due
        while true {
            waitForWork(until: deadline)
            state.withLock { s in
                queue.take(s.items)
                s.items.removeAll(keepingCapacity: true)
            }
            deadline = nil
            let now = clock.nowNanoseconds()
            var index = queue.head
            scan: while index < queue.items.count {
                switch queue.items[index] {
                case .write(var ops, var completion, let ticket, let at, _):
                    if let ticket {
                        if index > queue.lastUrgent, ticket.isPending, at &+ cancellableDelayNanos > now {
                            deadline = at &+ cancellableDelayNanos  // not yet: it may still be called off
                            break scan
                        }
                        guard let held = ticket.take() else { index += 1; batch.calledOff += 1; continue } // called off
                        (ops, completion) = (held.ops, held.completion)
                        batch.ticketed += 1
                    }
                    if batch.ops.count + ops.count > maxBatch { flush(&batch) }
                    batch.add(ops, completion)
                case .read(let body):
                    flush(&batch)
                    body()
                case .stop(let done):
                    flush(&batch)
                    done()
                    return
                }
                index += 1
            }
            flush(&batch)
            queue.head = index
            queue.dropHandled()
        }
    }

    /// Sleeps until there is work: any item when nothing waits out its delay, else until `deadline`
    /// or an urgent item.
    private func waitForWork(until deadline: UInt64?) {
        if let due = deadline {
            let mayWait = state.withLock { s -> Bool in
                if s.items.contains(where: \.isUrgent) { return false }
                s.writerDelaying = true
                return true
            }
            if mayWait { clock.sleep(until: due, orUntil: wake) }
            state.withLock { $0.writerDelaying = false }
        } else {
            let mustWait = state.withLock { s -> Bool in
                if !s.items.isEmpty { return false }
                s.writerIdle = true
                return true
            }
            if mustWait { wake.wait() }
        }
    }

    /// Commits the batch in one transaction and calls its completions.
    private func flush(_ batch: inout Batch) {
        if batch.completions.isEmpty && batch.calledOff == 0 { return }
        var failures = [Error?](repeating: nil, count: batch.completions.count)
        let observer = batchObserver.withLock { $0 }
        let started = observer == nil ? 0 : clock.nowNanoseconds()
        if !batch.completions.isEmpty {
            do { try store.apply(batch.ops) } catch {
                // One bad item must fail only its own caller: apply each item on its own (one
                // savepoint each). Only when that transaction fails too does every item fail.
                logger("batch of \(batch.completions.count) failed (\(error)); applying its items one by one")
                // Each with all its own ops: a collapse left out of `ops` as a repeat is needed
                // again if the item that had it fails alone.
                do { failures = try store.applyIsolated(batch.itemOps) } catch {
                    failures = [Error?](repeating: error, count: batch.completions.count)
                }
            }
        }
        let (transactions, n, committed, off) = (batch.completions.isEmpty ? 0 : 1, batch.ops.count, batch.ticketed, batch.calledOff)
        if let observer, transactions == 1 { observer.call(n, clock.nowNanoseconds() - started) }
        state.withLock {
            $0.batches += transactions
            $0.committedOps += n
            $0.ticketedCommitted += committed
            $0.ticketedCalledOff += off
        }
        for (c, failure) in zip(batch.completions, failures) { c?(failure) }
        if transactions == 1, let after = afterCompletions.withLock({ $0 }) { after.call() }
        batch.reset()
    }
}

/// A handle on one submitted write that may be called off until the writer takes it. The engine uses
/// it for a message handed to an online device at once: if the device confirms it before the write
/// is taken, the message never needs to touch the disk (it is delivered; nothing is left to lose).
/// The ticket holds the write's ops and completion while it is pending; whoever ends that (the writer
/// taking it, a caller calling it off) takes them, so they are released on that thread.
public final class WriteTicket: Sendable {
    struct Held: Sendable {
        let ops: [StoreOp]
        let completion: GroupCommitter.Completion?
    }

    private enum Phase: Sendable {
        case pending(Held?)
        case taken
        case cancelled
    }

    private let phase = Locked(Phase.pending(nil))

    public init() {}

    /// True when the write was called off in time: it will never be applied and its completion will
    /// never run. False when the writer has already taken it (it is, or is being, committed).
    public func cancel() -> Bool {
        let (won, held) = phase.withLock { p -> (Bool, Held?) in
            guard case .pending(let held) = p else { return (false, nil) }
            p = .cancelled
            return (true, held)
        }
        withExtendedLifetime(held) {}  // released here, outside the ticket's lock, on the caller's thread
        return won
    }

    /// Neither taken by the writer nor cancelled: the write has not reached the store (yet).
    public var isPending: Bool { phase.withLock { if case .pending = $0 { true } else { false } } }

    /// Called off in time: the write never reaches the store.
    public var isCancelled: Bool { phase.withLock { if case .cancelled = $0 { true } else { false } } }

    /// The submitter's side: the write to apply when the writer takes it. Called off already: dropped.
    func hold(_ ops: [StoreOp], _ completion: GroupCommitter.Completion?) {
        let dropped = phase.withLock { p -> Held? in
            let held = Held(ops: ops, completion: completion)
            guard case .pending = p else { return held }
            p = .pending(held)
            return nil
        }
        withExtendedLifetime(dropped) {}
    }

    /// The writer's side: the write, if it is still wanted (it can then no longer be cancelled); nil
    /// when it was called off.
    func take() -> Held? {
        phase.withLock { p -> Held? in
            guard case .pending(let held) = p else { return nil }
            p = .taken
            return held ?? Held(ops: [], completion: nil)
        }
    }
}

public struct StoreStopped: Error, CustomStringConvertible {
    public init() {}
    public var description: String { "the store is shutting down" }
}
