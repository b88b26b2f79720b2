import DeliveryCore
import StoreModel

/// How the engine reaches a connected simulated device. Implemented by the device channel; every
/// method may be called from any thread and must hop to the connection's own thread itself.
public protocol DeviceLink: AnyObject, Sendable {
    /// Writes these messages (JSON objects, as the app sees them) to the device.
    func deliver(_ messages: [DeviceDelivery])
    /// Closes the connection (the device went offline, or was uninstalled).
    func close()
    /// Whether the device wants each message's platform view (`DeviceDelivery.view`). A device can
    /// turn it off for its connection (the load generator's devices do): rendering a view costs
    /// the emulator about a quarter of its downstream rate (docs/benchmarks.md).
    var wantsPlatformViews: Bool { get }
}

extension DeviceLink {
    public var wantsPlatformViews: Bool { true }
}

/// How the engine reaches one app-server connection.
public protocol AppServerLink: AnyObject, Sendable {
    /// Sends CONNECTION_DRAINING and closes the connection after the grace period.
    func drain()
    /// Writes upstream messages / receipts (the JSON inside `<gcm>`) to the app server.
    func sendOutbound(_ messages: [OutboundMessage])
    /// Ends the stream and closes the connection.
    func close()
    /// Pending downstream (accepted, not yet answered) on this connection, for the admin API.
    var pendingCount: Int { get }
    var isDraining: Bool { get }
}

public struct AppServerConnectionInfo: Sendable, Equatable {
    public var id: String
    public var senderID: String
    public var remoteAddress: String
    public var connectedAtMillis: Int64
    public var resource: String?

    public init(id: String, senderID: String, remoteAddress: String, connectedAtMillis: Int64, resource: String? = nil) {
        self.id = id
        self.senderID = senderID
        self.remoteAddress = remoteAddress
        self.connectedAtMillis = connectedAtMillis
        self.resource = resource
    }
}

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

/// One message on its way to an app server.
public struct OutboundMessage: Sendable, Equatable {
    public var messageID: String
    public var json: String

    public init(messageID: String, json: String) {
        self.messageID = messageID
        self.json = json
    }
}
