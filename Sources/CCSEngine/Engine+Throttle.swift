import DeliveryCore
import StoreModel

/// FCM's throttling of collapsible messages (`serve --collapsible-throttle`, `CollapsibleThrottle`):
/// consulted when a collapsible message is about to go to a connected device. One past the device's
/// bucket stays in the store, where a newer message with its collapse key replaces it as for any
/// stored message, and goes when the bucket has room again (`tick`, on the engine's clock).
extension Engine {
    /// Whether `m` may go to `token` now; counts it if so. A collapsible message that may not is held
    /// back, journaled `throttled` once. Non-collapsible messages and the service's own notices pass.
    func admitThrottled(_ m: QueuedMessage, token: String, _ throttle: inout CollapsibleThrottle) -> Bool {
        guard m.kind == .message, let key = m.collapseKey else { return true }
        let now = clock.nowMillis()
        if throttle.admit(token, now: now) {
            throttle.release(token, collapseKey: key)
            return true
        }
        if throttle.hold(token, collapseKey: key, id: m.deviceMessageID) {
            let next = throttle.nextRefillMillis(token, now: now).map { " until \($0)" } ?? ""
            journal(.throttled, m, detail: "collapsible-message throttle: held back\(next) (\(throttle.rate) per device)")
        }
        return false
    }

    /// After a read of the device's queue: held messages that were collapsed away or expired meanwhile,
    /// or that the device's state keeps back now (Doze), are held by the throttle no longer (the tick
    /// would read the queue again every second for them); `take` holds again what is still throttled.
    func keepThrottled(_ queue: [QueuedMessage], token: String, _ s: inout State) {
        let deviceState = s.registry.deviceStates[token] ?? DeviceState()
        let platform = s.sessions.online[token]?.platform
        s.throttle!.keep(token, ids: Set(queue.filter { deviceState.admits($0, platform: platform) }.map(\.deviceMessageID)))
    }

    /// Reads again the queues of connected devices whose held messages may go now.
    func releaseThrottled(now: Int64) {
        let due = state.withLock { s -> [(String, any DeviceLink)] in
            guard s.throttle != nil else { return [] }
            s.throttle!.prune(now: now)
            // A device whose window is full gets its queue read again as it ACKs (`startsRefill`).
            return s.throttle!.due(now: now).compactMap { token in
                guard let online = s.sessions.online[token], online.loaded,
                      online.inFlight.count < configuration.deviceWindow else { return nil }
                return s.deviceLinks[online.connection].map { (token, $0) }
            }
        }
        for (token, link) in due { deliverBacklog(token: token, link: link) }
    }

    /// The device message ids the throttle holds back for `token` (the admin queue view marks them).
    public func throttledMessageIDs(token: String) -> Set<String> {
        state.withLock { s in
            guard let throttle = s.throttle else { return [] }
            return Set(throttle.heldIDs(token))
        }
    }
}
