import CCSEngine
import GoogleAuth

/// What the audit needs of one send request beyond its target and answer.
struct AuditedRequest {
    /// Of the body, so that a request sent again unchanged is recognised (nil with the audit off).
    var bodyDigest: UInt64?
    /// The documented limit the message broke (MessageTooBig, InvalidDataKey), in the answer's words.
    var limit: String?
    var accessTokenID: String?

    /// FNV-1a over the body: cheap, and enough to tell one request from another within a run.
    static func digest(_ body: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in body.utf8 {
            h ^= UInt64(b)
            h &*= 0x100_0000_01b3
        }
        return h
    }
}

/// The audit's view of HTTP requests beyond the send itself (docs/conformance.md, "The HTTP rules"):
/// requests refused before their target was read, and the access tokens v1 senders fetch and present.
extension FCMHTTPAPI {
    /// A request refused before its target was known (a body that does not parse, a message over the
    /// limits): only the rules about the request itself are judged.
    func auditRefusedRequest(api: String, sender: String, status: Int, request: AuditedRequest) {
        engine.report(appServer: .httpSend(.init(sender: sender, api: api, targetKey: "(refused before its target was read)", tokens: [],
                                                 status: status, retryAfterSeconds: nil, unregistered: [], bodyDigest: request.bodyDigest,
                                                 limit: request.limit, accessToken: request.accessTokenID)))
    }

    /// The sender a project stands for, when it names exactly one (a project number, a configured
    /// project): whom the audit holds to a request refused before its tokens were read.
    func auditSender(project: String?) -> String? {
        guard engine.isAuditing, let project, case .success(.fixed(let sender)) = senderChoice(project: project) else { return nil }
        return sender
    }

    /// How evidence names an access token: its last 12 characters (part of its signature), never the
    /// token itself.
    static func accessTokenID(_ token: String) -> String { "…" + String(token.suffix(12)) }

    /// A token the token endpoint just issued: its project's sender is held to reusing it.
    func auditTokenFetched(_ token: String) {
        guard engine.isAuditing, case .success(let grant) = tokens.check(token, nowMillis: engine.clock.nowMillis()),
              let sender = auditSender(project: grant.projectID) else { return }
        engine.report(appServer: .accessTokenFetched(sender: sender, id: Self.accessTokenID(token), expiresAtMillis: grant.expiresAtMillis))
    }

    /// A v1 request answered 401 for the access token it presented (not for a missing one).
    func auditTokenRefused(authorization: String?, project: String) {
        guard let sender = auditSender(project: project), case .bearer(let token) = AuthorizationHeader.parse(authorization) else { return }
        engine.report(appServer: .accessTokenRefused(sender: sender, id: Self.accessTokenID(token), api: "v1"))
    }

    /// The access-token id of a request, for its evidence; nil with the audit off.
    func auditedTokenID(authorization: String?) -> String? {
        guard engine.isAuditing, case .bearer(let token) = AuthorizationHeader.parse(authorization) else { return nil }
        return Self.accessTokenID(token)
    }
}

extension GoogleError {
    /// The documented limit a refused v1 message broke (reserved data key, 4096-byte payload), in the
    /// answer's words; nil for any other refusal.
    var brokenLimit: String? {
        guard let d = fieldViolation?.description, d == "reserved key" || d == "message is too big" else { return nil }
        return message
    }
}
