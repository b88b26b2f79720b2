import PushDomain

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
    public var platform: Platform
    public var senders: [String]
    public var createdAt: Int64
    public var status: DeviceStatus
    /// Engine-owned device state (foreground/background, idle, …) as compact JSON.
    public var state: String
    /// The token of the installation that replaced this one (set once, on reinstall). Its own field:
    /// a state change rewrites `state` and must never lose it.
    public var replacedBy: String?
    /// A web device's Push API subscription (nil on Android and iOS).
    public var webSubscription: WebPushSubscription?
    /// The iOS app's APNs device token (64 lower-case hex digits), when it registered for APNs; its
    /// bundle id is `app` (docs/apns.md).
    public var apnsToken: String?
    /// The tokens this installation was given after `token` (a token refresh), oldest first: the last
    /// is its canonical registration id; every one reaches the installation (docs/semantics.md,
    /// "Canonical registration ids"). `token` stays the installation's key.
    public var refreshedTokens: [String]

    /// The token an app server should use now: the newest refreshed one, or `token`.
    public var canonicalToken: String { refreshedTokens.last ?? token }

    public init(token: String, deviceID: String, secret: String, app: String, platform: Platform,
                senders: [String], createdAt: Int64, status: DeviceStatus = .active, state: String = "{}",
                replacedBy: String? = nil, webSubscription: WebPushSubscription? = nil, apnsToken: String? = nil,
                refreshedTokens: [String] = []) {
        self.refreshedTokens = refreshedTokens
        self.replacedBy = replacedBy
        self.webSubscription = webSubscription
        self.apnsToken = apnsToken
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
    public var delayWhileIdle: Bool
    /// A notification message (shown in the tray when the app is in the background).
    public var isNotification: Bool
    /// An app server's message, or a notice the service produces itself.
    public var kind: MessageKind
    /// The JSON object the device receives.
    public var payload: String
    /// HTTP v1's per-platform blocks as sent (`{"android":…,"apns":…,"webpush":…}`), kept so that
    /// each platform's view can be rendered from them; nil when the message had none.
    public var platformBlocks: String?

    public init(token: String, deviceMessageID: String, senderID: String, appMessageID: String,
                collapseKey: String?, priority: String, timeToLive: Int, enqueuedAt: Int64,
                expiresAt: Int64, deliveryReceiptRequested: Bool, delayWhileIdle: Bool = false,
                isNotification: Bool = false, kind: MessageKind = .message, payload: String,
                platformBlocks: String? = nil) {
        self.platformBlocks = platformBlocks
        self.delayWhileIdle = delayWhileIdle
        self.isNotification = isNotification
        self.kind = kind
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

/// The per-device storage limits of FCM, applied when a message is stored for a device that cannot
/// take it now.
public struct QueueLimits: Sendable, Equatable {
    /// Distinct collapse keys kept per device and app; the oldest key's messages go first.
    public var maxCollapseKeys: Int
    /// Non-collapsible messages kept; one more and all of them are discarded.
    public var maxNonCollapsible: Int
    /// Stored in their place (once) so that the app learns of the loss (`onDeletedMessages()`).
    public var overflowNotice: QueuedMessage

    public init(maxCollapseKeys: Int, maxNonCollapsible: Int, overflowNotice: QueuedMessage) {
        self.maxCollapseKeys = maxCollapseKeys
        self.maxNonCollapsible = maxNonCollapsible
        self.overflowNotice = overflowNotice
    }
}

/// A message for an app server: an upstream message from a device, or a delivery receipt.
public struct OutboundRecord: Sendable, Equatable {
    public var senderID: String
    public var kind: OutboundKind
    /// The id the app server sees and ACKs (`dr2:…` for receipts).
    public var messageID: String
    /// The device the message is from (upstream) or about (receipt).
    public var token: String
    /// The JSON inside `<gcm>`.
    public var json: String
    public var createdAt: Int64
    public var expiresAt: Int64
    /// For a receipt: the id of the message it is about (`0:…%…`), which names it in the journal.
    public var aboutMessageID: String?

    public init(senderID: String, kind: OutboundKind, messageID: String, token: String, json: String,
                createdAt: Int64, expiresAt: Int64, aboutMessageID: String? = nil) {
        self.aboutMessageID = aboutMessageID
        self.senderID = senderID
        self.kind = kind
        self.messageID = messageID
        self.token = token
        self.json = json
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// A notification shown in a simulated device's tray, waiting for the user to tap it.
public struct TrayEntry: Sendable, Equatable {
    public var token: String
    public var deviceMessageID: String
    public var payload: String
    public var shownAt: Int64
    /// The device platform's view of it (`PlatformRendering`), rendered when it was shown.
    public var view: String?

    public init(token: String, deviceMessageID: String, payload: String, shownAt: Int64, view: String? = nil) {
        self.view = view
        self.token = token
        self.deviceMessageID = deviceMessageID
        self.payload = payload
        self.shownAt = shownAt
    }
}

/// A device group (seed 004): a sender's named set of registration tokens behind one notification
/// key. The key itself is not stored: it is an encoding of `id` (several encodings are valid).
public struct DeviceGroupRecord: Sendable, Equatable {
    /// Random, 32 hex digits; what every notification key of the group encodes.
    public var id: String
    public var senderID: String
    /// `notification_key_name`, unique per sender.
    public var name: String
    /// Registration tokens in the order they joined.
    public var members: [String]
    public var createdAt: Int64

    public init(id: String, senderID: String, name: String, members: [String], createdAt: Int64) {
        self.id = id
        self.senderID = senderID
        self.name = name
        self.members = members
        self.createdAt = createdAt
    }
}

/// A feedback-service tuple: a notification reached a device whose app (the bundle id) was uninstalled.
public struct APNsFeedbackRecord: Sendable, Equatable {
    public var bundleID: String
    /// 64 lower-case hex digits.
    public var deviceToken: String
    /// Seconds since the epoch (the engine's clock), when the app was found gone.
    public var timestamp: Int64

    public init(bundleID: String, deviceToken: String, timestamp: Int64) {
        self.bundleID = bundleID
        self.deviceToken = deviceToken
        self.timestamp = timestamp
    }
}

/// One change to durable state. A batch of them is applied in one transaction.
public enum StoreOp: Sendable, Equatable {
    case upsertSender(SenderRecord)
    case upsertDevice(DeviceRecord)
    /// Stores a message. A collapse key replaces every stored message with the same key for the
    /// token; with limits, the FCM storage limits are enforced too.
    case enqueue(QueuedMessage, limits: QueueLimits?)
    case removeMessage(token: String, deviceMessageID: String)
    case removeAllMessages(token: String)
    /// Drops every stored message of the token with this collapse key (a newer one replaces them).
    /// Its own op, so that it commits even when the newer message's write is called off.
    case collapse(token: String, collapseKey: String)
    /// Drops every queued message whose time to live has run out.
    case removeExpired(now: Int64)
    case addOutbound(OutboundRecord)
    /// Outbound items are keyed by the device too: two devices may use the same upstream message id,
    /// and an app server may reuse a message id (and so a receipt id) for two devices.
    case removeOutbound(senderID: String, kind: OutboundKind, token: String, messageID: String)
    case addToTray(TrayEntry)
    case removeFromTray(token: String, deviceMessageID: String)
    case clearTray(token: String)
    case setMeta(key: String, value: String)
    /// Creates a device group or replaces its name and members.
    case upsertDeviceGroup(DeviceGroupRecord)
    /// A device group is gone (its last member was removed).
    case removeDeviceGroup(id: String)
    /// Every device with its queue, tray, outbound items and device groups (a reset; senders and
    /// meta stay). Groups go too: their members are tokens that no longer exist.
    case removeAllDevices
    /// One sender's state: its queued messages, upstream messages and receipts, subscriptions and
    /// device groups, and the devices registered for it alone (with their trays). Devices that
    /// other senders share stay (the caller rewrites their sender lists).
    case removeSenderData(senderID: String)
    /// Adds the subscriptions not there yet (an existing one keeps its date).
    case subscribe([TopicSubscription])
    case unsubscribe(senderID: String, topic: String, tokens: [String])
    /// Every subscription of the token (its app was uninstalled).
    case removeSubscriptions(token: String)
    case fanOut(FanOut)
    /// Records (or refreshes the time of) a feedback tuple.
    case addAPNsFeedback(APNsFeedbackRecord)
    /// Tuples a feedback connection has read: each goes unless it was refreshed since.
    case removeAPNsFeedback([APNsFeedbackRecord])
    /// The app registered again on this device token: its tuples go (the provider must not drop it).
    case removeAPNsFeedbackToken(bundleID: String, deviceToken: String)
}

/// One app instance's subscription to one of its sender's topics.
public struct TopicSubscription: Sendable, Equatable {
    public var senderID: String
    public var topic: String
    public var token: String
    public var addedAt: Int64

    public init(senderID: String, topic: String, token: String, addedAt: Int64) {
        self.senderID = senderID
        self.topic = topic
        self.token = token
        self.addedAt = addedAt
    }
}

/// One topic or condition message for many devices, written in one transaction: the body once, a
/// queue row per device of the audience, each under FCM's per-device storage rules.
public struct FanOut: Sendable, Equatable {
    /// Who gets it, as of the send.
    public enum Audience: Sendable, Equatable {
        /// The topic's subscribers (active devices: an uninstall removes its subscriptions), read in
        /// the same transaction: the subscription writes submitted before this one are in it, later
        /// ones are not (the writer keeps submission order).
        case subscribers(senderID: String, topic: String)
        /// Tokens chosen by the engine (a condition's matches): active devices only.
        case tokens([String])
    }

    public var audience: Audience
    /// The stored row for every device: its `token` is ignored, its payload is stored once.
    public var message: QueuedMessage
    /// FCM's per-device storage limits; the notice's token is each overflowing device's.
    public var limits: QueueLimits
    /// A notification without a collapse key collapses under each device's app package: the
    /// stored key is then each device's `app`, and `message.collapseKey` is ignored.
    public var collapseKeyIsApp: Bool

    public init(audience: Audience, message: QueuedMessage, limits: QueueLimits, collapseKeyIsApp: Bool = false) {
        self.audience = audience
        self.message = message
        self.limits = limits
        self.collapseKeyIsApp = collapseKeyIsApp
    }
}

/// A queued message the store removed by a rule rather than by delivery.
public struct QueueRemoval: Sendable, Equatable {
    public enum Reason: String, Sendable {
        /// Replaced by a newer message with its collapse key, or past the collapse-key limit.
        case collapsed
        /// Past the limit of stored messages without a collapse key.
        case discarded
        /// Its time to live ran out.
        case expired
    }

    public var token: String
    public var deviceMessageID: String
    public var reason: Reason
    public var senderID: String?
    /// The message being written was itself dropped (the 100-message limit), never stored.
    public var onArrival: Bool

    public init(token: String, deviceMessageID: String, reason: Reason, senderID: String? = nil, onArrival: Bool = false) {
        self.senderID = senderID
        self.onArrival = onArrival
        self.token = token
        self.deviceMessageID = deviceMessageID
        self.reason = reason
    }
}

