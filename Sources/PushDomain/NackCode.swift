/// The `error` codes CCS puts in a NACK: the reasons a downstream message is refused, which fault
/// rules name too. The NACK itself and its JSON are `CCSProtocol`'s (`Nack`, `OutgoingJSON.nack`).
public enum NackCode: String, Sendable, CaseIterable {
    case badAck = "BAD_ACK"
    case badRegistration = "BAD_REGISTRATION"
    case connectionDraining = "CONNECTION_DRAINING"
    case deviceUnregistered = "DEVICE_UNREGISTERED"
    case internalServerError = "INTERNAL_SERVER_ERROR"
    case invalidJSON = "INVALID_JSON"
    case deviceMessageRateExceeded = "DEVICE_MESSAGE_RATE_EXCEEDED"
    case serviceUnavailable = "SERVICE_UNAVAILABLE"
    case topicsMessageRateExceeded = "TOPICS_MESSAGE_RATE_EXCEEDED"
    case quotaExceeded = "QUOTA_EXCEEDED"

    /// The `error_description` used when the engine has nothing more specific to say.
    /// Only DEVICE_MESSAGE_RATE_EXCEEDED's text is from Google's documentation; the rest are ours.
    public var defaultDescription: String {
        switch self {
        case .badAck: return "Invalid ACK"
        case .badRegistration: return "Invalid token on 'to' field"
        case .connectionDraining: return "Connection is draining; send on a new connection"
        case .deviceUnregistered: return "Device unregistered"
        case .internalServerError: return "Internal server error"
        case .invalidJSON: return "InvalidJson"
        case .deviceMessageRateExceeded: return "Downstream message rate exceeded for this registration id"
        case .serviceUnavailable: return "Service unavailable; retry with exponential backoff"
        case .topicsMessageRateExceeded: return "Topics message rate exceeded"
        case .quotaExceeded: return "Quota exceeded"
        }
    }

    /// Whether the documentation tells the app server to retry a message NACKed with this code.
    public var isRetryable: Bool {
        switch self {
        case .connectionDraining, .internalServerError, .serviceUnavailable,
            .deviceMessageRateExceeded, .topicsMessageRateExceeded, .quotaExceeded:
            return true
        case .badAck, .badRegistration, .deviceUnregistered, .invalidJSON:
            return false
        }
    }
}
