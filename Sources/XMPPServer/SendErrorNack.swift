import CCSProtocol
import PushDomain

/// How CCS says why it refused a message: each domain refusal as a NACK code and
/// `error_description` (the texts are the emulator's; docs/semantics.md lists them).
extension Nack {
    init(messageID: String, from: String?, refusal: SendError) {
        switch refusal {
        case .invalidRegistration(let token):
            self.init(messageID: messageID, from: from, code: .badRegistration,
                      description: "Invalid token on 'to' field: \(token)")
        case .unregistered:
            self.init(messageID: messageID, from: from, code: .deviceUnregistered,
                      description: "Device unregistered: the app was uninstalled")
        case .senderMismatch(_, let sender):
            self.init(messageID: messageID, from: from, code: .badRegistration,
                      description: "MismatchSenderId: the token is not registered for sender \(sender)")
        case .packageMismatch(_, let package):
            self.init(messageID: messageID, from: from, code: .badRegistration,
                      description: "InvalidPackageName: the token does not belong to package \(package)")
        case .invalidTopic(let reason):
            self.init(messageID: messageID, from: from, code: .invalidJSON, description: "Invalid topic or condition: \(reason)")
        case .groupNotFound:
            self.init(messageID: messageID, from: from, code: .deviceUnregistered,
                      description: "notification_key not found")
        case .messageTooBig(_, let bytes):
            self.init(messageID: messageID, from: from, code: .invalidJSON,
                      description: "MessageTooBig: the APNs payload for the iOS device is \(bytes) bytes, the limit is 4096")
        case .deviceMessageRateExceeded:
            self.init(messageID: messageID, from: from, code: .deviceMessageRateExceeded,
                      description: NackCode.deviceMessageRateExceeded.defaultDescription)
        case .topicsMessageRateExceeded:
            self.init(messageID: messageID, from: from, code: .topicsMessageRateExceeded,
                      description: NackCode.topicsMessageRateExceeded.defaultDescription)
        case .unavailable:
            self.init(messageID: messageID, from: from, code: .serviceUnavailable,
                      description: "Service unavailable: the message could not be stored; retry with exponential backoff")
        }
    }

    /// The NACK for a device-group message that no member took (seed 004: "if FCM fails to send to
    /// every device in the group, the app server receives a NACK"). The code is the emulator's
    /// choice (docs/semantics.md, "Device groups"): INTERNAL_SERVER_ERROR when any member failed
    /// for a store error (retrying may work), DEVICE_UNREGISTERED when every member was found
    /// uninstalled or unknown, DEVICE_MESSAGE_RATE_EXCEEDED when any was over its rate limit (later
    /// may work), BAD_REGISTRATION otherwise (a member of another app or sender).
    init(messageID: String, groupOutcome outcome: GroupSendOutcome) {
        let errors = outcome.failed.map(\.error)
        let code: NackCode
        if errors.contains(.unavailable) {
            code = .serviceUnavailable
        } else if errors.contains(where: { if case .deviceMessageRateExceeded = $0 { true } else { false } }) {
            code = .deviceMessageRateExceeded
        } else if errors.allSatisfy({ if case .unregistered = $0 { true } else if case .invalidRegistration = $0 { true } else { false } }) {
            code = .deviceUnregistered
        } else {
            code = .badRegistration
        }
        self.init(messageID: messageID, from: outcome.notificationKey, code: code,
                  description: "Message failed to be sent to every device in the group (\(outcome.failure) of \(outcome.failure))")
    }
}
