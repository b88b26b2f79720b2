import StoreModel

/// One message on its way to a device's connection.
public struct DeviceDelivery: Sendable, Equatable {
    public var message: QueuedMessage
    /// A notification for an app in the background: the system shows it in the tray.
    public var toTray: Bool
    /// What the device's platform shows (`PlatformRendering`, JSON), rendered at hand-over; nil for
    /// the service's own notices (deleted messages, send errors).
    public var view: String?

    public init(message: QueuedMessage, toTray: Bool, view: String? = nil) {
        self.message = message
        self.toTray = toTray
        self.view = view
    }
}
