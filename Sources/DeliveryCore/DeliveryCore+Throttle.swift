import StoreModel

/// FCM's throttling of collapsible messages (`--collapsible-throttle`, `CollapsibleThrottle`) in the
/// core: consulted when a collapsible message is about to go to a connected device. One past the
/// device's bucket stays in the store, where a newer message with its collapse key replaces it as for
/// any stored message, and goes when the bucket has room again (`throttleDue`, on the engine's clock).
extension DeliveryCore {
    /// Whether `m` may go to `token` now; counts it if so. A collapsible message that may not is held
    /// back, reported `throttled` once. Non-collapsible messages and the service's own notices pass.
    static func admitThrottled(_ m: QueuedMessage, token: String, now: Int64, _ throttle: inout CollapsibleThrottle,
                               _ effects: inout [DeviceEffect]) -> Bool {
        guard m.kind == .message, let key = m.collapseKey else { return true }
        if throttle.admit(token, now: now) {
            throttle.release(token, collapseKey: key)
            return true
        }
        if throttle.hold(token, collapseKey: key, id: m.deviceMessageID) {
            let next = throttle.nextRefillMillis(token, now: now).map { " until \($0)" } ?? ""
            effects.append(.throttled(m, detail: "collapsible-message throttle: held back\(next) (\(throttle.rate) per device)"))
        }
        return false
    }

    /// After a read of the device's queue: held messages that were collapsed away or expired meanwhile,
    /// or that the device's state keeps back now (Doze), are held by the throttle no longer (the tick
    /// would read the queue again every second for them); `take` holds again what is still throttled.
    mutating func keepThrottled(_ queue: [QueuedMessage], token: String) {
        let deviceState = registry.deviceStates[token] ?? DeviceState()
        let platform = sessions.online[token]?.platform
        throttle!.keep(token, ids: Set(queue.filter { deviceState.admits($0, platform: platform) }.map(\.deviceMessageID)))
    }

    /// The connected devices whose held messages may go now: their queues are read again. A device
    /// whose window is full gets its queue read again as it confirms (`startsRefill`).
    package mutating func throttleDue(now: Int64) -> [(token: String, connection: DeviceConnectionID)] {
        guard throttle != nil else { return [] }
        throttle!.prune(now: now)
        return throttle!.due(now: now).compactMap { token in
            guard let online = sessions.online[token], online.loaded, online.inFlight.count < settings.deviceWindow else { return nil }
            return (token, online.connection)
        }
    }
}
