import PushDomain
import StoreModel

/// How messages reach a device's connection in the core: a commit's hand-over, a backlog read, a
/// live delivery or another node's offer all end in `take`; a confirmation frees the window.
extension DeliveryCore {
    /// A device connection is up: it replaces the device's older one (closed; what it held goes with
    /// it) and gets its queue read.
    package mutating func deviceConnected(_ token: String, connection: DeviceConnectionID) -> [DeviceEffect] {
        let replaced = sessions.connect(token, connection: connection, platform: registry.devices[token]?.platform)
        return (replaced.map { [Self.release($0, close: true)] } ?? []) + [.readBacklog(token: token, connection)]
    }

    /// The connection went down: nothing when a newer one had already replaced it.
    package mutating func deviceDisconnected(_ token: String, connection: DeviceConnectionID) -> [DeviceEffect] {
        guard let gone = sessions.disconnect(token, connection: connection) else { return [] }
        throttle?.forget(token)
        return [Self.release(gone, close: false)]
    }

    /// Takes the device offline at once (an uninstall, a reset): its connection is closed.
    package mutating func dropDevice(_ token: String) -> [DeviceEffect] {
        sessions.drop(token).map { [Self.release($0, close: true)] } ?? []
    }

    /// Takes every device offline: their connections are closed.
    package mutating func dropAllDevices() -> [DeviceEffect] {
        sessions.dropAll().map { Self.release($0, close: true) }
    }

    private static func release(_ gone: OnlineDevice, close: Bool) -> DeviceEffect {
        .release(gone.connection, writes: gone.inFlight.values.compactMap { $0.early?.write }, close: close)
    }

    /// The messages the device's state admits now become in-flight on its connection, as many as its
    /// window has room for; the rest wait (in the store: a message handed over live that does not fit
    /// is stored by its caller, one offered by another node is left to its write there).
    /// A notification for an app in the background goes to the system's tray, not to the app.
    /// `offeredBy`: another node offered them before writing them. Without it and `early`, they are
    /// written (read from the store, or their commit announced).
    /// `fromBacklog`: they are the queue as read from the store. Once the window kept something back,
    /// only such a read hands anything over (`OnlineDevice.heldBack`), so nothing overtakes it.
    package mutating func take(_ messages: [QueuedMessage], token: String, early: EarlyDelivery? = nil, offeredBy: String? = nil,
                               fromBacklog: Bool = false, now: Int64) -> [DeviceEffect] {
        let deviceState = registry.deviceStates[token] ?? DeviceState()
        let app = registry.devices[token]?.app ?? ""
        // Out of the core while the connection is changed in place (exclusive access to one part);
        // taken out, not copied, so that its maps are not copied on the write.
        var throttle = self.throttle
        self.throttle = nil
        defer { self.throttle = throttle }
        var removals: [StoreOp] = []
        var effects: [DeviceEffect] = []
        let window = settings.deviceWindow
        let written = early == nil && offeredBy == nil
        let delivery = sessions.modify(token) { online -> DeviceEffect? in
            let deliveries = online.take(messages, fromBacklog: fromBacklog, deviceState: deviceState, written: written, window: window,
                                         removals: &removals,
                                         admit: { m in throttle == nil || Self.admitThrottled(m, token: token, now: now, &throttle!, &effects) },
                                         entry: { m, toTray in InFlightDownstream(message: m, toTray: toTray, early: early, offeredBy: offeredBy) })
            guard !deliveries.isEmpty else { return nil }
            return .deliver(online.connection, deliveries, online.platform ?? .android, app: app, appInBackground: !deviceState.foreground)
        }
        if !removals.isEmpty { effects.append(.write(removals)) }
        if let delivery = delivery ?? nil { effects.append(delivery) }
        return effects
    }

    /// Committed messages (stored here, or announced by another node): handed to the device's
    /// connection if it is online, has its backlog and may take them now. Otherwise they wait.
    package mutating func handOver(_ messages: [QueuedMessage], to token: String, now: Int64) -> [DeviceEffect] {
        guard sessions.online[token]?.loaded == true else { return [] }
        return take(messages, token: token, now: now)
    }

    /// The device's queue as read for `connection` (after every write submitted before the read):
    /// the connection is loaded, and takes what it may. Nil when that connection is no longer the
    /// device's (the read is dropped).
    package mutating func backlogRead(_ stored: [QueuedMessage], token: String, connection: DeviceConnectionID,
                                      now: Int64) -> [DeviceEffect]? {
        let holdsAPNs = stored.contains { $0.kind == .apnsNotification }
        guard sessions.modify(token, connection: connection, { $0.backlogRead(holdsAPNsNotification: holdsAPNs) }) != nil else {
            return nil
        }
        let unheld = stored.filter { $0.expiresAt > now }
        if throttle != nil { keepThrottled(unheld, token: token) }
        return take(unheld, token: token, fromBacklog: true, now: now)
    }

    /// A read of the queue for `connection` failed; false when that connection is no longer the device's.
    package mutating func backlogReadFailed(token: String, connection: DeviceConnectionID) -> Bool {
        sessions.modify(token, connection: connection) { $0.refillFailed() } != nil
    }

    /// Another node's messages for a device connected here, before their write: handed over like a
    /// live delivery, as far as the device takes them now; the rest is left to their write there.
    package mutating func liveOffered(_ messages: [QueuedMessage], to token: String, from node: String, now: Int64) -> [DeviceEffect] {
        guard sessions.online[token]?.loaded == true, registry.devices[token]?.status == .active,
              let platform = sessions.online[token]?.platform ?? registry.devices[token]?.platform else { return [] }
        let deviceState = registry.deviceStates[token] ?? DeviceState()
        let fit = messages.filter { Self.mayOffer($0, deviceState: deviceState, platform: platform) }
        return take(fit, token: token, offeredBy: node, now: now)
    }

    /// The device confirmed `id` on its connection: it leaves the window. The host calls off the
    /// write named in the answer, when there is one, and says which way it went (`remember`).
    package mutating func confirm(_ id: String, token: String) -> Confirmation? {
        let window = settings.deviceWindow
        return sessions.modify(token) { $0.confirm(id, window: window) } ?? nil
    }

    /// After `confirm`: whether the host called the write off.
    package mutating func remember(_ confirmation: Confirmation, token: String, calledOff: Bool) {
        sessions.modify(token) { $0.remember(confirmation.entry, calledOff: calledOff) }
    }
}
