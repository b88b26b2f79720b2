/// The platform a registration belongs to; it decides what the device is shown and when.
public enum Platform: String, Sendable, CaseIterable {
    case android
    case ios
    /// A browser with the Firebase JS SDK: an app id and a Push API subscription.
    case web
}

/// Whether a registration token is alive.
public enum DeviceStatus: String, Sendable, CaseIterable {
    case active
    /// The app was uninstalled: the token is dead for good.
    case uninstalled
}

/// What sits in a device's queue: an app server's message, or a notice the service itself gives the
/// device (its `message_type`).
public enum MessageKind: String, Sendable, CaseIterable {
    case message
    /// More than 100 messages were stored: they were dropped (`onDeletedMessages()`).
    case deletedMessages = "deleted_messages"
    /// An upstream message of this device could not be delivered (`onSendError()`).
    case sendError = "send_error"
    /// A notification from the APNs legacy binary gateway for an iOS app (docs/apns.md).
    case apnsNotification = "apns"
}

/// What waits for an app server.
public enum OutboundKind: String, Sendable, CaseIterable {
    /// A device's upstream message.
    case upstream
    /// A delivery receipt for a downstream message.
    case receipt
}
