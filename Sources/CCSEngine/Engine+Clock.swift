import DeliveryCore
import StoreModel

extension Engine {
    public var isVirtualClock: Bool { clock is VirtualClock }

    public enum ClockAdvanceError: Error, Sendable, Equatable {
        /// The clock is the wall clock, which nobody moves.
        case wallClock
        /// The new time would be past `VirtualClock.maximumMillis`.
        case beyondMaximum
    }

    /// Moves the virtual clock forward, persists its time, and runs everything the new time triggers
    /// (expiry, ACK timeouts).
    public func advanceClock(byMillis ms: Int64) async throws(ClockAdvanceError) -> Int64 {
        guard let virtual = clock as? VirtualClock else { throw .wallClock }
        guard let now = virtual.advance(byMillis: ms) else { throw .beyondMaximum }
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
            committer.submit([.setMeta(key: VirtualClock.metaKey, value: String(now))], urgent: true) { _ in cont.resume() }
        }
        tick()
        // Let the expiry ops just submitted commit before answering, so that a read right after sees them.
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
            committer.afterPendingWrites { cont.resume() }
        }
        return now
    }
}

extension VirtualClock {
    /// Where the virtual clock's time is kept across restarts (and shared by a cluster's nodes).
    public static let metaKey = MetaKey.virtualClock
}
