import Locking

/// How many links to this node have not yet shown its secret (docs/scaling.md): at most `limit` at a
/// time, so that connections that never speak cannot pile up on the link listener. Each admitted
/// link is released once, when it shows the secret or closes.
final class LinkAdmission: Sendable {
    let limit: Int
    private let waiting = Locked(0)

    init(limit: Int) {
        self.limit = limit
    }

    /// One more unauthenticated link, if there is room.
    func admit() -> Bool {
        waiting.withLock { n in
            guard n < limit else { return false }
            n += 1
            return true
        }
    }

    func release() {
        waiting.withLock { $0 -= 1 }
    }
}
