import CCSEngine
import FaultInjection
import Foundation
import PushDomain

/// An accepted notification request on its way through the engine (the same path as the binary
/// gateway's: fault rules, the device token's owner, the store-and-forward, the journal and metrics),
/// and the answer the provider gets for it.
struct ProviderDelivery: Sendable {
    let engine: Engine

    func send(_ n: ProviderNotification, environment: ProviderEnvironment, connection: String,
              answer: @escaping @Sendable (ProviderAnswer) -> Void) {
        if let reason = injectedReason(n, connection: connection) {
            refuse(n, reason, connection: connection, answer: answer)
            return
        }
        switch engine.apnsRecipient(deviceToken: n.deviceToken, bundleID: n.bundleID) {
        case .unknown: refuse(n, .badDeviceToken, connection: connection, answer: answer); return
        case .otherApp: refuse(n, .deviceTokenNotForTopic, connection: connection, answer: answer); return
        case .installed, .uninstalled: break
        }
        let now = engine.clock.nowMillis()
        let request = SendRequest(sender: n.bundleID, target: .apnsDeviceToken(n.deviceToken), message: n.message(nowMillis: now),
                                  origin: SendOrigin(api: .apnsHTTP2, connection: connection, clientMessageID: n.apnsID))
        let engine = self.engine
        let uniqueID = environment == .sandbox ? UUID().uuidString.lowercased() : nil
        engine.send(request) { results in
            let result: ProviderAnswer
            switch results.first {
            case .accepted?, .fannedOut?: result = .accepted(apnsID: n.apnsID, uniqueID: uniqueID)
            case .refused(.unregistered)?:
                // The time the feedback service reports for the same token (whole seconds), in ms.
                result = .refused(.unregistered, apnsID: n.apnsID, timestampMillis: engine.clock.nowMillis() / 1000 * 1000)
            case .refused(.senderMismatch)?: result = .refused(.deviceTokenNotForTopic, apnsID: n.apnsID)
            case .refused(.invalidRegistration)?: result = .refused(.badDeviceToken, apnsID: n.apnsID)
            case .refused?, .group?, nil: result = .refused(.serviceUnavailable, apnsID: n.apnsID)
            }
            engine.recordAnswers(request, results) { _ in result.reasonText }
            answer(result)
        }
    }

    /// An `apns_error` rule's answer: its reason, or the one matching its binary status.
    private func injectedReason(_ n: ProviderNotification, connection: String) -> ProviderReason? {
        for action in engine.intercept(.apnsNotification, FaultSubject(
            sender: n.bundleID, token: n.deviceToken, topic: n.topic, messageID: n.apnsID, origin: "apns_http2:" + connection)) {
            guard case .apnsError(let status, let reason) = action else { continue }
            if let reason, let known = ProviderReason(rawValue: reason) { return known }
            return Self.reason(binaryStatus: status)
        }
        return nil
    }

    /// The provider API's counterpart of a binary error-response status (docs/apns.md).
    static func reason(binaryStatus: UInt8) -> ProviderReason {
        switch binaryStatus {
        case 2: return .missingDeviceToken
        case 3: return .missingTopic
        case 4: return .payloadEmpty
        case 5, 8: return .badDeviceToken
        case 6: return .badTopic
        case 7: return .payloadTooLarge
        case 10: return .shutdown
        default: return .internalServerError
        }
    }

    private func refuse(_ n: ProviderNotification, _ reason: ProviderReason, connection: String,
                        answer: @Sendable (ProviderAnswer) -> Void) {
        let result = ProviderAnswer.refused(reason, apnsID: n.apnsID)
        engine.recordRefused(api: .apnsHTTP2, sender: n.bundleID, token: n.deviceToken, topic: n.topic,
                             connection: connection, clientMessageID: n.apnsID, detail: result.reasonText)
        answer(result)
    }
}

extension ProviderAnswer {
    /// The journal's and the metrics' words for it: `HTTP 410 Unregistered`.
    var reasonText: String {
        guard status != 200, let body, let json = try? JSONValue.parse(body), let reason = json["reason"]?.stringValue else {
            return "HTTP \(status)"
        }
        return "HTTP \(status) \(reason)"
    }
}
