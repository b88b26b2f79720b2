import DeliveryCore
/// What an app server did, as the front end that speaks with it reports it (`Engine.report(appServer:)`):
/// the app-server audit listens (`AuditObserver`), and the front ends name no listener.
public enum AppServerEvent: Sendable {
    // CCS: one XMPP connection's stanzas.
    case connectionOpened(connection: String, sender: String)
    case connectionClosed(connection: String)
    /// A downstream message arrived on `connection`.
    case downstreamReceived(connection: String, messageID: String, to: String?)
    /// It was answered; `canonical` is the ACK's `registration_id` (an earlier token of a refreshed app).
    case downstreamAnswered(connection: String, messageID: String, to: String?, answer: Answer, canonical: String? = nil)
    /// An upstream message or a receipt was written to the app server, and later ACKed by it.
    case outboundSent(connection: String, messageID: String, receipt: Bool)
    case outboundAcknowledged(connection: String, messageID: String)
    /// The connection was told to drain.
    case drained(connection: String)
    // HTTP: one send request and its answer, and the access tokens a v1 sender fetched and presented.
    case httpSend(HTTPSend)
    case accessTokenFetched(sender: String, id: String, expiresAtMillis: Int64)
    case accessTokenRefused(sender: String, id: String, api: String)

    /// CCS's answer to a downstream message.
    public enum Answer: Sendable, Equatable {
        case ack
        case nack(code: String)
        case stanzaError(String)
    }

    /// A send request to the HTTP APIs and its answer (the fields of `Auditor.httpSend`).
    public struct HTTPSend: Sendable {
        public var sender: String
        public var api: String
        /// What was sent to (a token, a topic, a condition), so that a retry is recognised.
        public var targetKey: String
        public var tokens: [String]
        public var status: Int
        public var retryAfterSeconds: Int?
        /// Tokens the answer said are not registered.
        public var unregistered: [String]
        /// Old token → the canonical registration id its result named.
        public var canonical: [(old: String, new: String)]
        /// Of the request body: a request sent again unchanged is recognised by it.
        public var bodyDigest: UInt64?
        /// The documented limit the message broke, when the answer was MessageTooBig or InvalidDataKey.
        public var limit: String?
        public var accessToken: String?

        public init(sender: String, api: String, targetKey: String, tokens: [String], status: Int, retryAfterSeconds: Int?,
                    unregistered: [String], canonical: [(old: String, new: String)] = [], bodyDigest: UInt64? = nil,
                    limit: String? = nil, accessToken: String? = nil) {
            (self.sender, self.api, self.targetKey, self.tokens, self.status) = (sender, api, targetKey, tokens, status)
            (self.retryAfterSeconds, self.unregistered, self.canonical) = (retryAfterSeconds, unregistered, canonical)
            (self.bodyDigest, self.limit, self.accessToken) = (bodyDigest, limit, accessToken)
        }
    }
}
