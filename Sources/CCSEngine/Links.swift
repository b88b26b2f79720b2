import PushDomain
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

/// One message on its way to an app server.
public struct OutboundMessage: Sendable, Equatable {
    public var messageID: String
    public var json: String

    public init(messageID: String, json: String) {
        self.messageID = messageID
        self.json = json
    }
}

extension Engine {
    /// The device connections the core knows by id (`DeviceConnectionID`): the host's side of
    /// `DeviceSessions`, changed in the same critical section as the session it belongs to.
    struct DeviceLinks {
        private var byID: [DeviceConnectionID: any DeviceLink] = [:]
        private var ids: [ObjectIdentifier: DeviceConnectionID] = [:]
        private var next: UInt = 0

        /// A new connection's id (a link registered again keeps its id).
        mutating func register(_ link: any DeviceLink) -> DeviceConnectionID {
            if let id = ids[ObjectIdentifier(link)] { return id }
            next += 1
            let id = DeviceConnectionID(next)
            byID[id] = link
            ids[ObjectIdentifier(link)] = id
            return id
        }

        /// The id of a registered link; nil once it was removed (it is no device's connection).
        func id(of link: any DeviceLink) -> DeviceConnectionID? { ids[ObjectIdentifier(link)] }

        subscript(_ id: DeviceConnectionID) -> (any DeviceLink)? { byID[id] }

        @discardableResult
        mutating func remove(_ id: DeviceConnectionID) -> (any DeviceLink)? {
            guard let link = byID.removeValue(forKey: id) else { return nil }
            ids[ObjectIdentifier(link)] = nil
            return link
        }
    }

    /// A message handed over before its write committed (`EarlyDelivery`): the write's ticket, which
    /// only the host touches (calling it off takes the writer's lock), and the answer it owes.
    struct EarlyWrite {
        let ticket: WriteTicket
        let settle: @Sendable (SendResult) -> Void
    }
}
