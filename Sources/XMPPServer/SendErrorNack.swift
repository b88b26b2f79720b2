import CCSProtocol

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
        case .unsupportedTarget(let kind, _):
            self.init(messageID: messageID, from: from, code: .badRegistration,
                      description: "\(kind.prefix(1).uppercased() + kind.dropFirst()) messaging is not supported by this emulator yet")
        case .invalidTopic(let reason):
            self.init(messageID: messageID, from: from, code: .invalidJSON, description: "Invalid topic or condition: \(reason)")
        case .internalError:
            self.init(messageID: messageID, from: from, code: .internalServerError, description: "Internal server error")
        }
    }
}
