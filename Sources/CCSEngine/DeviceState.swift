import CCSProtocol

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

    /// Doze rules: `high` wakes an idle device; `normal` and `delay_while_idle` wait until it is active.
    func admits(priority: String, delayWhileIdle: Bool) -> Bool {
        !idle || (priority == Priority.high.rawValue && !delayWhileIdle)
    }
}
