import Locking

/// The port a listener bound when its service ran, told once to everyone who waits for it: the port,
/// or the error that kept it from binding (nil when it stopped before binding). `Emulator.start` waits
/// for each listener's; the proxy waits for the TLS listener's, where its tunnels lead.
final class ListenerPort: Sendable {
    enum Outcome: Sendable {
        case bound(Int)
        case failed(any Error)
        case stopped
    }

    private struct State {
        var outcome: Outcome?
        var waiting: [CheckedContinuation<Outcome, Never>] = []
    }

    private let state = Locked(State())

    /// Settles the outcome; only the first call counts.
    func settle(_ outcome: Outcome) {
        let waiting = state.withLock { s -> [CheckedContinuation<Outcome, Never>] in
            guard s.outcome == nil else { return [] }
            s.outcome = outcome
            defer { s.waiting = [] }
            return s.waiting
        }
        for continuation in waiting { continuation.resume(returning: outcome) }
    }

    func outcome() async -> Outcome {
        await withCheckedContinuation { continuation in
            let settled = state.withLock { s -> Outcome? in
                if let outcome = s.outcome { return outcome }
                s.waiting.append(continuation)
                return nil
            }
            if let settled { continuation.resume(returning: settled) }
        }
    }

    /// The port, or nil when the listener did not bind.
    func port() async -> Int? {
        if case .bound(let port) = await outcome() { return port }
        return nil
    }
}
