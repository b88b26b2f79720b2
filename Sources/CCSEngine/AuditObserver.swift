import DeliveryCore
import AppServerAudit

/// The app-server audit as an observer of what the front ends report (`AppServerEvent`): each event
/// is one of the auditor's inputs (docs/conformance.md, "The audit").
struct AuditObserver: DeliveryObserver {
    let auditor: Auditor

    func observe(_ event: DeliveryEvent) {
        guard case .appServer(let e) = event else { return }
        switch e {
        case .connectionOpened(let connection, let sender): auditor.connectionOpened(connection, sender: sender)
        case .connectionClosed(let connection): auditor.connectionClosed(connection)
        case .downstreamReceived(let connection, let messageID, let to):
            auditor.downstreamReceived(connection: connection, messageID: messageID, to: to)
        case .downstreamAnswered(let connection, let messageID, let to, let answer, let canonical):
            auditor.downstreamAnswered(connection: connection, messageID: messageID, to: to, answer: Self.answer(answer),
                                       canonical: canonical)
        case .outboundSent(let connection, let messageID, let receipt):
            auditor.outboundSent(connection: connection, messageID: messageID, receipt: receipt)
        case .outboundAcknowledged(let connection, let messageID):
            auditor.outboundAcknowledged(connection: connection, messageID: messageID)
        case .drained(let connection): auditor.drained(connection: connection)
        case .httpSend(let r):
            auditor.httpSend(sender: r.sender, api: r.api, targetKey: r.targetKey, tokens: r.tokens, status: r.status,
                             retryAfterSeconds: r.retryAfterSeconds, unregistered: r.unregistered, canonical: r.canonical,
                             bodyDigest: r.bodyDigest, limit: r.limit, accessToken: r.accessToken)
        case .accessTokenFetched(let sender, let id, let expiresAt):
            auditor.accessTokenFetched(sender: sender, id: id, expiresAtMillis: expiresAt)
        case .accessTokenRefused(let sender, let id, let api): auditor.accessTokenRefused(sender: sender, id: id, api: api)
        }
    }

    static func answer(_ a: AppServerEvent.Answer) -> Auditor.Answer {
        switch a {
        case .ack: return .ack
        case .nack(let code): return .nack(code: code)
        case .stanzaError(let description): return .stanzaError(description)
        }
    }
}
