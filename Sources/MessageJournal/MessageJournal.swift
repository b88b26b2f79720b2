import Foundation
import Locking

/// The message journal: every message's events from every entry point, kept within a bounded
/// retention, queried by the admin API and followed live (docs/admin-api.md#message-journal).
///
/// `record` is what the hot path pays: the event's bytes appended to a reused buffer under a lock
/// (`EncodedEvents` says why bytes), and a yield to each live follower. One writer thread writes the batches to the journal's own SQLite file and
/// prunes it. Past `maxPending` unwritten events (the writer cannot keep up), new events are counted
/// as dropped instead of growing memory.
public final class MessageJournal: Sendable {
    public struct Retention: Sendable, Equatable {
        /// Events kept at most (the oldest go first).
        public var maxEvents: Int
        /// Events recorded longer ago than this go (wall time, ms).
        public var maxAgeMillis: Int64

        public init(maxEvents: Int = 200_000, maxAgeMillis: Int64 = 24 * 3_600_000) {
            self.maxEvents = maxEvents
            self.maxAgeMillis = maxAgeMillis
        }

        /// Parses `--journal-retention`: a count, an age (`30s`, `90m`, `24h`, `7d`), or both with a
        /// comma (`100000,24h`). The part not given keeps its default.
        public static func parse(_ text: String) -> Retention? {
            var retention = Retention()
            let parts = text.split(separator: ",", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count) else { return nil }
            var sawCount = false, sawAge = false
            for part in parts {
                let p = part.trimmingCharacters(in: .whitespaces)
                if let count = Int(p) {
                    guard !sawCount, count >= 1, count <= 100_000_000 else { return nil }
                    retention.maxEvents = count
                    sawCount = true
                } else if let unit = p.last, let value = Int64(p.dropLast()), value >= 1 {
                    let millis: Int64
                    switch unit {
                    case "s": millis = 1000
                    case "m": millis = 60_000
                    case "h": millis = 3_600_000
                    case "d": millis = 86_400_000
                    default: return nil
                    }
                    guard !sawAge, value <= 3650 * 86_400_000 / millis else { return nil }
                    retention.maxAgeMillis = value * millis
                    sawAge = true
                } else {
                    return nil
                }
            }
            return retention
        }
    }

    public struct Figures: Sendable, Equatable {
        public var recorded: Int64
        public var written: Int64
        public var dropped: Int64
        public var pruned: Int64
        public var followers: Int
        /// The writer is waiting for events (nothing pending, no batch being written).
        public var writerIdle: Bool
    }

    private struct State {
        var pending = EncodedEvents(capacity: 1 << 20)
        /// The buffer the writer gave back, reused for the next batch (no allocation in steady state).
        var spare: EncodedEvents? = EncodedEvents(capacity: 1 << 20)
        var nextSeq: Int64
        /// The newest seq written to the database.
        var writtenSeq: Int64
        var followers: [Int: AsyncStream<JournalEvent>.Continuation] = [:]
        var nextFollower = 0
        /// Set at a graceful stop: every stream has ended and no new one starts.
        var followingEnded = false
        var waiters: [(seq: Int64, continuation: CheckedContinuation<Void, Never>)] = []
        var writerIdle = false
        /// The writer lets the next batch gather (`batchPause`); only a query waiting wakes it early.
        var writerPausing = false
        var stopped = false
        var recorded: Int64 = 0
        var dropped: Int64 = 0
        var pruned: Int64 = 0
        var localIDs: Int64 = 0
    }

    public let retention: Retention
    public let maxPending: Int
    /// How long the writer lets events gather after a batch: one transaction per pause instead of one
    /// per few events (each transaction rewrites the pages it touches in the WAL). Short, because a
    /// batch is a burst of the writer's CPU that the event loops and their peers on the same cores
    /// wait through: at 100 ms, p99 send→device at half the downstream rate was 3.4–4.0 ms, at 20 ms
    /// 2.4–2.5 ms, for about a fifth more writer CPU and no throughput that the runs could show
    /// (docs/benchmarks.md, sixth round). A query never waits for it: `sync` wakes the writer.
    public static let batchPause: DispatchTimeInterval = .milliseconds(20)
    private let database: JournalDatabase
    private let state: Locked<State>
    private let wake = DispatchSemaphore(value: 0)
    private let stoppedSignal = DispatchSemaphore(value: 0)
    private let wallMillis: @Sendable () -> Int64
    /// Makes the journal's own ids unique across restarts.
    private let startedAt: Int64
    private let logger: @Sendable (String) -> Void

    /// Opens (or creates) the journal at `path`.
    public init(path: String, retention: Retention = Retention(), maxPending: Int = 100_000,
                wallMillis: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) },
                logger: @escaping @Sendable (String) -> Void = { try? FileHandle.standardError.write(contentsOf: Data(("journal: " + $0 + "\n").utf8)) }) throws {
        database = try JournalDatabase(path: path)
        let largest = try database.largestSeq()
        state = Locked(State(nextSeq: largest + 1, writtenSeq: largest))
        self.retention = retention
        self.maxPending = maxPending
        self.wallMillis = wallMillis
        self.startedAt = wallMillis()
        self.logger = logger
        let thread = Thread { [self] in run() }
        thread.name = "ccs-journal-writer"
        thread.start()
    }

    // MARK: recording

    /// Records one event (its `seq` is assigned here).
    public func record(_ event: JournalEvent) {
        let signal = state.withLock { s -> Bool in
            guard !s.stopped else { return false }
            guard s.pending.count < maxPending else { s.dropped += 1; return false }
            var e = event
            e.seq = s.nextSeq
            s.nextSeq += 1
            s.recorded += 1
            s.pending.append(e)
            if !s.followers.isEmpty { for follower in s.followers.values { follower.yield(e) } }
            if s.writerIdle { s.writerIdle = false; return true }
            return false
        }
        if signal { wake.signal() }
    }

    /// An id for a message refused or not stored, which FCM gives no id (`local:` and a number
    /// unique in this journal).
    public func makeMessageID() -> String {
        let n = state.withLock { s -> Int64 in
            s.localIDs += 1
            return s.localIDs
        }
        return "local:\(startedAt)-\(n)"
    }

    // MARK: reading

    /// Waits until everything recorded before this call is in the database (queries call it first, so
    /// a test sees the events of what it just did).
    public func sync() async {
        let target = state.withLock { $0.nextSeq - 1 }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.writtenSeq >= target || s.stopped { return true }
                s.waiters.append((target, continuation))
                if s.writerIdle || s.writerPausing {
                    s.writerIdle = false
                    s.writerPausing = false
                    wake.signal()
                }
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    public func messages(_ filter: JournalFilter) async throws -> [JournalMessageSummary] {
        await sync()
        return try database.messages(filter)
    }

    /// A message's events in order (by the journal's id, or else by the id the app server chose).
    public func events(messageID: String) async throws -> [JournalEvent] {
        await sync()
        return try database.events(messageID: messageID)
    }

    public func storedCount() async throws -> Int {
        await sync()
        return try database.count()
    }

    /// Followers at once, at most: each holds a buffer of up to `followerBuffer` events, and every
    /// event is copied to each (`GET /emulator/v1/events` answers 429 past it).
    public static let maximumFollowers = 32
    public static let followerBuffer = 10_000

    /// Every event recorded from now on, as it is recorded; nil when `maximumFollowers` already follow
    /// or the journal is stopping. A follower that does not keep up loses the oldest of its unread
    /// events (`followerBuffer` are kept), never slows the journal down.
    public func follow() -> AsyncStream<JournalEvent>? {
        let (stream, continuation) = AsyncStream<JournalEvent>.makeStream(bufferingPolicy: .bufferingNewest(Self.followerBuffer))
        let id = state.withLock { s -> Int? in
            guard !s.followingEnded, s.followers.count < Self.maximumFollowers else { return nil }
            let id = s.nextFollower
            s.nextFollower += 1
            s.followers[id] = continuation
            return id
        }
        guard let id else { return nil }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.followers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Ends every follower's stream and refuses new ones: a graceful stop must not wait for streams
    /// that would never end by themselves.
    public func endFollowers() {
        let ended = state.withLock { s -> [AsyncStream<JournalEvent>.Continuation] in
            s.followingEnded = true
            return Array(s.followers.values)
        }
        for continuation in ended { continuation.finish() }
    }

    /// The events recorded after `seq`, oldest first, at most `limit` (what a follower that
    /// reconnects with `Last-Event-ID` missed; pruned events are gone).
    public func events(after seq: Int64, limit: Int = followerBuffer) async throws -> [JournalEvent] {
        await sync()
        return try database.events(after: seq, limit: limit)
    }

    public var figures: Figures {
        state.withLock { s in
            Figures(recorded: s.recorded, written: s.writtenSeq, dropped: s.dropped, pruned: s.pruned,
                    followers: s.followers.count, writerIdle: s.writerIdle)
        }
    }

    /// Forgets everything (the admin reset).
    public func removeAll() async throws {
        await sync()
        try database.removeAll()
    }

    /// Forgets the messages of one sender.
    public func removeAll(sender: String) async throws {
        await sync()
        try database.removeAll(sender: sender)
    }

    /// Writes what is pending and stops the writer.
    public func shutdown() {
        let wasRunning = state.withLock { s -> Bool in
            if s.stopped { return false }
            s.stopped = true
            return true
        }
        guard wasRunning else { return }
        wake.signal()
        stoppedSignal.wait()
    }

    // MARK: the writer

    private func run() {
        // The journal yields to the traffic it records: on a machine with no core to spare, the
        // event loops come first and the writer catches up in the pauses (it batches anyway).
        #if os(Linux)
        // On Linux the nice value is the thread's: `who` 0 is the calling thread alone.
        setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 5)
        #endif
        var lastPrune: Int64 = -1000
        let scratch = JournalDatabase.InsertScratch()
        while true {
            var (batch, stopping) = state.withLock { s -> (EncodedEvents, Bool) in
                var batch = s.spare ?? EncodedEvents()
                s.spare = nil
                swap(&batch, &s.pending)
                if batch.count == 0 && !s.stopped { s.writerIdle = true }
                return (batch, s.stopped)
            }
            if batch.count == 0 && !stopping {
                // Wake at least once a second to prune by age.
                _ = wake.wait(timeout: .now() + .seconds(1))
                state.withLock { $0.writerIdle = false }
            }
            let now = wallMillis()
            if batch.count > 0 {
                do {
                    try database.insert(batch, recordedAt: now, scratch: scratch)
                } catch {
                    // A journal that cannot write (full disk) must not stop the emulator: the batch is
                    // lost and counted, and the next one is tried.
                    state.withLock { $0.dropped += Int64(batch.count) }
                    logger("writing \(batch.count) events failed: \(error)")
                }
            }
            let ready = state.withLock { s -> [CheckedContinuation<Void, Never>] in
                // Written: everything but what is pending now. Not "everything recorded": events that
                // arrived while the writer waited (their record() is what woke it) are still pending,
                // and this batch was taken before the wait.
                s.writtenSeq = max(s.writtenSeq, s.nextSeq - 1 - Int64(s.pending.count))
                return takeWaiters(&s)
            }
            for r in ready { r.resume() }
            // Once a second by the monotonic clock (the wall clock can be moved: tests move theirs).
            let uptimeMillis = Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000)
            if uptimeMillis - lastPrune >= 1000 || stopping {
                lastPrune = uptimeMillis
                do {
                    let removed = try database.prune(keeping: retention.maxEvents, olderThan: now - retention.maxAgeMillis)
                    if removed > 0 { state.withLock { $0.pruned += Int64(removed) } }
                } catch {
                    logger("pruning failed: \(error)")
                }
            }
            let wrote = batch.count > 0
            batch.removeAll()
            state.withLock { [batch] in $0.spare = batch }
            if wrote {
                let pause = state.withLock { s -> Bool in
                    guard s.waiters.isEmpty, !s.stopped else { return false }
                    s.writerPausing = true
                    return true
                }
                if pause {
                    _ = wake.wait(timeout: .now() + Self.batchPause)
                    state.withLock { $0.writerPausing = false }
                }
            }
            if stopping && !wrote {
                let rest = state.withLock { s -> [CheckedContinuation<Void, Never>] in
                    for f in s.followers.values { f.finish() }
                    let all = s.waiters.map(\.continuation)
                    s.waiters.removeAll()
                    return all
                }
                for r in rest { r.resume() }
                stoppedSignal.signal()
                return
            }
        }
    }

    private func takeWaiters(_ s: inout State) -> [CheckedContinuation<Void, Never>] {
        let written = s.writtenSeq
        let ready = s.waiters.filter { $0.seq <= written }.map(\.continuation)
        s.waiters.removeAll { $0.seq <= written }
        return ready
    }
}
