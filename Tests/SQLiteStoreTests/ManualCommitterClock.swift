import Dispatch
import Locking
import StoreModel

/// A committer clock that moves only when the test advances it: a cancellable write's delay is over
/// when the test says so, never because the machine was slow (or fast).
final class ManualCommitterClock: CommitterClock {
    private struct Sleeper {
        let deadline: UInt64
        let wake: DispatchSemaphore
    }

    private struct State {
        var now: UInt64 = 1_000_000_000
        var sleepers: [ObjectIdentifier: Sleeper] = [:]
        /// Tests waiting for the writer to begin sleeping.
        var awaitingSleeper: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())

    func nowNanoseconds() -> UInt64 { state.withLock { $0.now } }

    /// Registers the writer as sleeping until `deadline`; `advance` wakes it once the deadline has
    /// come. Checked under the same lock as `advance`, so a deadline passed meanwhile is never missed.
    func sleep(until deadline: UInt64, orUntil wake: DispatchSemaphore) {
        let key = ObjectIdentifier(wake)
        let (due, waiting) = state.withLock { s -> (Bool, [CheckedContinuation<Void, Never>]) in
            if deadline <= s.now { return (true, []) }
            s.sleepers[key] = Sleeper(deadline: deadline, wake: wake)
            defer { s.awaitingSleeper.removeAll() }
            return (false, s.awaitingSleeper)
        }
        for test in waiting { test.resume() }
        if due { return }
        wake.wait()
        state.withLock { _ = $0.sleepers.removeValue(forKey: key) }
    }

    /// Moves time on and wakes every sleeper whose deadline has come.
    func advance(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let nanos = UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
        let due = state.withLock { s -> [DispatchSemaphore] in
            s.now += nanos
            let woken = s.sleepers.filter { $0.value.deadline <= s.now }
            for key in woken.keys { s.sleepers[key] = nil }
            return woken.values.map(\.wake)
        }
        for wake in due { wake.signal() }
    }

    /// Returns once a writer sleeps on this clock for a deadline still to come: from then on, nothing
    /// it holds back is written before the test advances the clock (or submits something urgent).
    func untilAWriterSleeps() async {
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if !s.sleepers.isEmpty { return true }
                s.awaitingSleeper.append(cont)
                return false
            }
            if now { cont.resume() }
        }
    }
}
