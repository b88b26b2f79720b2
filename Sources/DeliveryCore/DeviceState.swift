import PushDomain
import StoreModel
import PlatformRendering

/// What a simulated device is doing, as far as delivery is concerned. Persisted with the device.
public struct DeviceState: Sendable, Equatable {
    /// The app is in the foreground: notification messages go to the app, not to the tray.
    public var foreground: Bool
    /// Doze: only high-priority messages (without delay_while_idle) are delivered.
    public var idle: Bool

    public init(foreground: Bool = true, idle: Bool = false) {
        self.foreground = foreground
        self.idle = idle
    }

    package init(json: String) {
        let o = (try? JSONValue.parse(json))?.objectValue ?? [:]
        foreground = o["foreground"]?.boolValue ?? true
        idle = o["idle"]?.boolValue ?? false
    }

    package var json: String {
        JSONValue.object(["foreground": .bool(foreground), "idle": .bool(idle)]).encoded()
    }

    /// Whether the device takes this message now, or it waits in the queue: no rule of
    /// `AdmissionRule.inForce` holds it back.
    package func admits(_ m: QueuedMessage, platform: Platform?) -> Bool {
        for rule in AdmissionRule.inForce where rule.holdsBack(m, state: self, platform: platform) { return false }
        return true
    }
}

/// A reason a connected device does not take a message now: it waits in the queue until the device's
/// state changes (`Engine.setDeviceState` hands over what the new state admits). Each rule is one
/// platform behaviour, checked on its own; a later rule (a fault, a platform's throttling) is one
/// more case.
package enum AdmissionRule: Sendable, CaseIterable {
    /// Doze: `high` wakes an idle device; `normal` and `delay_while_idle` wait until it is active.
    case doze
    /// iOS, app in the background: what APNs gets decides (`APNsNotification`): an alert (or badge,
    /// sound) goes to the system at once, a `content-available` push wakes the app (no throttling
    /// budget is modelled: docs/platforms.md), any other data message waits until the app is in the
    /// foreground (seed 000, "data messages").
    case iosBackgroundData

    /// The rules the engine applies, in this order (the cheaper first).
    package static let inForce: [AdmissionRule] = [.doze, .iosBackgroundData]

    package func holdsBack(_ m: QueuedMessage, state: DeviceState, platform: Platform?) -> Bool {
        switch self {
        case .doze:
            return state.idle && !(m.priority == Priority.high.rawValue && !m.delayWhileIdle)
        case .iosBackgroundData:
            guard platform == .ios, m.kind == .message, !state.foreground else { return false }
            let apns = APNsNotification.translate(DeliveredMessage(
                payloadJSON: m.payload, platformBlocksJSON: m.platformBlocks, acceptedAtMillis: m.enqueuedAt,
                app: "", appInBackground: true))
            return !(apns.isAlert || apns.wakesApp)
        }
    }
}
