import CCSEngine
import CCSProtocol
import PushDomain
import FaultInjection
import Hummingbird

/// Injected HTTP failures and the audit of HTTP senders (docs/conformance.md): shared by the
/// legacy API and v1 (and so by each part of `/batch`).
extension FCMHTTPAPI {
    /// What a retry of a request is recognised by: the same sender sending to the same target.
    static func auditKey(_ target: Target) -> String {
        switch target {
        case .token(let t): return "token:" + t
        case .tokens(let list): return "tokens:" + list.joined(separator: ",")
        case .topic(let t): return "topic:" + t
        case .condition(let c): return "condition:" + c
        case .group(let k): return "group:" + k
        case .apnsDeviceToken(let t): return "apns:" + t
        }
    }

    static func tokens(of target: Target) -> [String] {
        switch target {
        case .token(let t): return [t]
        case .tokens(let list): return list
        case .topic, .condition, .group, .apnsDeviceToken: return []
        }
    }

    /// An `http_error` rule that fires for this send: (status, Retry-After seconds).
    func injectedHTTPError(api: String, sender: String?, target: Target) -> (status: Int, retryAfter: Int?)? {
        guard engine.intercepts(.httpSend) else { return nil }
        var topic: String?
        if case .topic(let t) = target { topic = t }
        let subject = FaultSubject(sender: sender, token: Self.tokens(of: target).first, topic: topic, origin: "http:\(api)")
        for action in engine.intercept(.httpSend, subject) {
            if case .httpError(let status, let retryAfter) = action { return (status, retryAfter) }
        }
        return nil
    }

    func auditSend(api: String, sender: String, target: Target, status: Int, retryAfter: Int? = nil,
                   unregistered: [String] = [], canonical: [(old: String, new: String)] = [], request: AuditedRequest = AuditedRequest()) {
        engine.report(appServer: .httpSend(.init(sender: sender, api: api, targetKey: Self.auditKey(target), tokens: Self.tokens(of: target),
                                                 status: status, retryAfterSeconds: retryAfter, unregistered: unregistered,
                                                 canonical: canonical, bodyDigest: request.bodyDigest, limit: request.limit,
                                                 accessToken: request.accessTokenID)))
    }

    /// An injected failure in v1's words: each status as the `google.rpc` status and `FcmError` code FCM
    /// gives with it.
    static func injectedV1Error(status: Int, retryAfter: Int?) -> GoogleError {
        let code = HTTPResponse.Status(code: status)
        let (rpc, fcm, message): (String, String?, String)
        switch status {
        case 400: (rpc, fcm, message) = ("INVALID_ARGUMENT", "INVALID_ARGUMENT", "Request contains an invalid argument.")
        case 401: (rpc, fcm, message) = ("UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", "Auth error from APNS or Web Push Service")
        case 403: (rpc, fcm, message) = ("PERMISSION_DENIED", "SENDER_ID_MISMATCH", "SenderId mismatch")
        case 404: (rpc, fcm, message) = ("NOT_FOUND", "UNREGISTERED", "Requested entity was not found.")
        case 429: (rpc, fcm, message) = ("RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded for sending messages.")
        case 500: (rpc, fcm, message) = ("INTERNAL", "INTERNAL", "Internal error encountered.")
        case 503: (rpc, fcm, message) = ("UNAVAILABLE", "UNAVAILABLE", "The service is currently unavailable.")
        default: (rpc, fcm, message) = (status >= 500 ? "INTERNAL" : "FAILED_PRECONDITION", nil, "Injected failure \(status).")
        }
        if fcm == "INVALID_ARGUMENT" {
            var error = GoogleError.invalidArgument(message, field: "message", description: "injected fault")
            error.retryAfter = retryAfter
            return error
        }
        return GoogleError(status: code, rpcStatus: rpc, message: message, fcmErrorCode: fcm, retryAfter: retryAfter)
    }

    /// The legacy API's answer to an injected failure: the status with its reason phrase as plain
    /// text, and `Retry-After` when the rule gives one (FCM's legacy docs: 5xx may carry it).
    static func injectedLegacyResponse(status: Int, retryAfter: Int?) -> Response {
        let code = HTTPResponse.Status(code: status)
        var response = plainText(status: code, code.reasonPhrase)
        if let retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }
}
