import CCSStore

extension Engine {
    public var isVirtualClock: Bool { clock is VirtualClock }

    /// Moves the virtual clock forward, persists its time, and runs everything the new time triggers
    /// (expiry, ACK timeouts). Nil on the wall clock, which nobody moves.
    public func advanceClock(byMillis ms: Int64) async -> Int64? {
        guard let virtual = clock as? VirtualClock else { return nil }
        let now = virtual.advance(byMillis: ms)
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
    /// Where the virtual clock's time is kept across restarts.
    public static let metaKey = "virtual_clock_ms"
}
