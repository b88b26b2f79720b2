import CCSProtocol
import CCSStore

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

    init(json: String) {
        let o = (try? JSONValue.parse(json))?.objectValue ?? [:]
        foreground = o["foreground"]?.boolValue ?? true
        idle = o["idle"]?.boolValue ?? false
    }

    var json: String {
        JSONValue.object(["foreground": .bool(foreground), "idle": .bool(idle)]).encoded()
    }

    /// Whether the device takes this message now, or it waits in the queue:
    /// - Doze: `high` wakes an idle device; `normal` and `delay_while_idle` wait until it is active.
    /// - iOS: data messages are delivered only while the app is in the foreground (seed 000, "data
    ///   messages"); notification messages go to the system at once.
    func admits(_ m: QueuedMessage, platform: Platform?) -> Bool {
        if idle && !(m.priority == Priority.high.rawValue && !m.delayWhileIdle) { return false }
        if platform == .ios && m.kind == .message && !m.isNotification && !foreground { return false }
        return true
    }
}
