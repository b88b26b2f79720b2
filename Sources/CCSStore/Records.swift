/// Rows the store keeps. The store knows nothing of XMPP or of the engine's rules: these are plain
/// values, and every time is milliseconds since the Unix epoch on the engine's clock.

public struct SenderRecord: Sendable, Equatable {
    public var senderID: String
    public var serverKey: String
    public var createdAt: Int64

    public init(senderID: String, serverKey: String, createdAt: Int64) {
        self.senderID = senderID
        self.serverKey = serverKey
        self.createdAt = createdAt
    }
}

public struct DeviceRecord: Sendable, Equatable {
    public var token: String
    public var deviceID: String
    public var secret: String
    public var app: String
    public var platform: String
    public var senders: [String]
    public var createdAt: Int64
    /// "active" or "uninstalled".
    public var status: String
    /// Engine-owned device state (foreground/background, idle, …) as compact JSON.
    public var state: String

    public init(token: String, deviceID: String, secret: String, app: String, platform: String,
                senders: [String], createdAt: Int64, status: String = "active", state: String = "{}") {
        self.token = token
        self.deviceID = deviceID
        self.secret = secret
        self.app = app
        self.platform = platform
        self.senders = senders
        self.createdAt = createdAt
        self.status = status
        self.state = state
    }
}

/// One message waiting in a device's queue until the device ACKs it.
public struct QueuedMessage: Sendable, Equatable {
    public var token: String
    /// The id the device sees (FCM form `0:…%…`); unique per token.
    public var deviceMessageID: String
    public var senderID: String
    /// The `message_id` the app server used.
    public var appMessageID: String
    public var collapseKey: String?
    public var priority: String
    public var timeToLive: Int
    public var enqueuedAt: Int64
    public var expiresAt: Int64
    public var deliveryReceiptRequested: Bool
    /// The JSON object the device receives.
    public var payload: String

    public init(token: String, deviceMessageID: String, senderID: String, appMessageID: String,
                collapseKey: String?, priority: String, timeToLive: Int, enqueuedAt: Int64,
                expiresAt: Int64, deliveryReceiptRequested: Bool, payload: String) {
        self.token = token
        self.deviceMessageID = deviceMessageID
        self.senderID = senderID
        self.appMessageID = appMessageID
        self.collapseKey = collapseKey
        self.priority = priority
        self.timeToLive = timeToLive
        self.enqueuedAt = enqueuedAt
        self.expiresAt = expiresAt
        self.deliveryReceiptRequested = deliveryReceiptRequested
        self.payload = payload
    }
}

/// One change to durable state. A batch of them is applied in one transaction.
public enum StoreOp: Sendable, Equatable {
    case upsertSender(SenderRecord)
    case upsertDevice(DeviceRecord)
    case enqueue(QueuedMessage)
    case removeMessage(token: String, deviceMessageID: String)
    case removeAllMessages(token: String)
    case setMeta(key: String, value: String)
}
