import PushDomain

public struct Nack: Sendable, Equatable {
    public var messageID: String
    /// The downstream message's `to` (token, notification key or topic), or its condition.
    public var from: String?
    public var code: NackCode
    /// `error_description`.
    public var description: String

    public init(messageID: String, from: String?, code: NackCode, description: String) {
        self.messageID = messageID
        self.from = from
        self.code = code
        self.description = description
    }

    /// A NACK with the code's default description.
    public init(messageID: String, from: String?, code: NackCode) {
        self.init(messageID: messageID, from: from, code: code, description: code.defaultDescription)
    }

    /// BAD_REGISTRATION worded as in Google's documentation example.
    public static func badRegistration(messageID: String, token: String) -> Nack {
        Nack(messageID: messageID, from: token, code: .badRegistration,
             description: "Invalid token on 'to' field: \(token)")
    }
}
