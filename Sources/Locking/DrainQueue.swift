/// Items gathered from any thread for one drainer at a time, which takes them in rounds: whatever
/// came while it handled a round is its next round. `add` says whether the caller must start the
/// drainer (none is running); `take` hands over everything gathered, and a round that comes back
/// empty ends the drainer's run.
///
///     if queue.add(item) { start { while case let round = queue.take(), !round.isEmpty { handle(round) } } }
public final class DrainQueue<Item: Sendable>: Sendable {
    private let state = Locked<(items: [Item], draining: Bool)>(([], false))

    public init() {}

    /// Adds `item`; true if no drainer is running and the caller must start one.
    public func add(_ item: Item) -> Bool {
        state.withLock { s in
            s.items.append(item)
            if s.draining { return false }
            s.draining = true
            return true
        }
    }

    /// Everything gathered since the last round; empty means the drainer stops (the next `add`
    /// starts another).
    public func take() -> [Item] {
        state.withLock { s in
            let taken = s.items
            s.items = []
            if taken.isEmpty { s.draining = false }
            return taken
        }
    }
}
