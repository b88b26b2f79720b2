/// An upstream message (device → app server) as the service hands it to the app server: the app,
/// the data, the device's id for it, the sending device's newest token, and when it was addressed to
/// a device group, that group.
public struct UpstreamMessage: Sendable, Equatable {
    /// The app's package name.
    public var category: String
    public var data: [String: String]
    public var messageID: String
    /// The sending device's registration token.
    public var from: String
    public var timeToLive: Int?
    /// Set when the device addressed a device group's notification key instead of a sender.
    public var group: UpstreamGroup?

    public init(category: String, data: [String: String], messageID: String, from: String, timeToLive: Int? = nil,
                group: UpstreamGroup? = nil) {
        self.category = category
        self.data = data
        self.messageID = messageID
        self.from = from
        self.timeToLive = timeToLive
        self.group = group
    }
}

/// The device group an upstream message was addressed to: the key as the device wrote it (a group
/// has many valid key encodings) and the group's name, which an app server can match against what
/// it stored (docs/semantics.md, "Upstream to a device group").
public struct UpstreamGroup: Sendable, Equatable {
    public var key: String
    public var name: String

    public init(key: String, name: String) {
        self.key = key
        self.name = name
    }
}

/// What a device asks for when it sends upstream, read from its message by the device channel.
public struct UpstreamRequest: Sendable, Equatable {
    public var messageID: String
    /// `SENDER_ID@gcm.googleapis.com`, or a device group's notification key.
    public var to: String
    public var timeToLive: Int?
    /// Only string values travel (as in the client library).
    public var data: [String: String]

    public init(messageID: String, to: String, timeToLive: Int? = nil, data: [String: String] = [:]) {
        self.messageID = messageID
        self.to = to
        self.timeToLive = timeToLive
        self.data = data
    }
}

/// Why an upstream message was refused or given up: the device's `onSendError`. The raw values are
/// the error names the device receives.
public enum UpstreamError: String, Sendable, Hashable, CaseIterable {
    case missingMessageID = "MISSING_MESSAGE_ID"
    case missingTo = "MISSING_TO"
    case invalidTTL = "INVALID_TTL"
    case invalidSender = "INVALID_SENDER"
    case deviceUnregistered = "DEVICE_UNREGISTERED"
    case duplicateMessageID = "DUPLICATE_MESSAGE_ID"
    case tooManyMessages = "TOO_MANY_MESSAGES"
    case internalServerError = "INTERNAL_SERVER_ERROR"
    /// Its time to live ran out before any app server ACKed it.
    case ttlExceeded = "TTL_EXCEEDED"
}

/// The answer the device channel gives a device for one upstream message.
public enum UpstreamOutcome: Sendable, Hashable {
    /// Committed (or delivered): the device's `onMessageSent`.
    case sent(messageID: String)
    /// Refused or expired: the device's `onSendError`.
    case sendError(messageID: String, error: UpstreamError)
}

/// A delivery receipt (the device got a message whose sender asked for one), as the service hands it
/// to the app server.
public struct DeliveryReceipt: Sendable, Equatable {
    public static let messageIDPrefix = "dr2:"
    public static let sender = "gcm.googleapis.com"
    public static let messageSentToDevice = "MESSAGE_SENT_TO_DEVICE"

    public var category: String?
    /// `dr2:` + the original message id.
    public var messageID: String
    public var messageStatus: String
    public var originalMessageID: String
    public var deviceRegistrationID: String
    public var sentTimestampMillis: Int64?

    public init(category: String?, messageID: String, messageStatus: String, originalMessageID: String,
                deviceRegistrationID: String, sentTimestampMillis: Int64?) {
        self.category = category
        self.messageID = messageID
        self.messageStatus = messageStatus
        self.originalMessageID = originalMessageID
        self.deviceRegistrationID = deviceRegistrationID
        self.sentTimestampMillis = sentTimestampMillis
    }

    /// The receipt for a message handed to the device (`MESSAGE_SENT_TO_DEVICE`).
    public static func sentToDevice(category: String?, originalMessageID: String, deviceRegistrationID: String,
                                    sentTimestampMillis: Int64) -> DeliveryReceipt {
        DeliveryReceipt(category: category, messageID: messageIDPrefix + originalMessageID,
                        messageStatus: messageSentToDevice, originalMessageID: originalMessageID,
                        deviceRegistrationID: deviceRegistrationID, sentTimestampMillis: sentTimestampMillis)
    }

    /// The original message id an app server's ACK refers to, whether or not it kept the `dr2:` prefix.
    public static func originalMessageID(fromAck messageID: String) -> String {
        messageID.hasPrefix(messageIDPrefix) ? String(messageID.dropFirst(messageIDPrefix.count)) : messageID
    }
}
