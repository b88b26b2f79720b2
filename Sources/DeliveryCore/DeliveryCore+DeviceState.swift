import PushDomain
import StoreModel

/// A device's state changed (app in the foreground or background, Doze on or off) in the core.
extension DeliveryCore {
    /// What a state change did, to write it and to take it back (`undo`) when its commit fails.
    package struct StateChange: Sendable {
        package let before: DeviceRecord
        package let after: DeviceRecord
        package let stateBefore: DeviceState
        package let state: DeviceState
        /// Leaving Doze, or coming to the foreground (iOS data messages): what was held back may go
        /// now, so the device's queue is to be read again once the change is committed.
        package var woke: Bool { (stateBefore.idle && !state.idle) || cameForward }
        /// The change asked for the foreground (also when the app was there already).
        let cameForward: Bool
        package var ops: [StoreOp] { [.upsertDevice(after)] }
    }

    /// Nil for a token that is no installation's first.
    package mutating func setState(_ token: String, foreground: Bool?, idle: Bool?) -> StateChange? {
        guard let before = registry.devices[token] else { return nil }
        let stateBefore = registry.deviceStates[token] ?? DeviceState()
        var state = stateBefore
        if let foreground { state.foreground = foreground }
        if let idle { state.idle = idle }
        var after = before
        after.state = state.json
        registry.update(after, state: state)
        return StateChange(before: before, after: after, stateBefore: stateBefore, state: state, cameForward: foreground == true)
    }

    /// Takes a state change back, as far as nothing changed the installation since.
    package mutating func undo(_ c: StateChange) {
        guard registry.devices[c.before.token] == c.after else { return }
        registry.update(c.before, state: c.stateBefore)
    }
}
