import CCSEngine
import CCSProtocol
import PushDomain
import Foundation
import GoogleAuth
import HTTPRequestBody
import Hummingbird
import NIOCore

/// The legacy send API: `POST /fcm/send` and `POST /gcm/send` with `Authorization: key=SERVER_KEY`
/// (or, as firebase-admin-node's legacy calls do, `Authorization: Bearer …`).
extension FCMHTTPAPI {
    /// How the request authenticated, and so who sends.
    enum LegacyCaller {
        case choice(SenderChoice)
        case refused(String)
    }

    /// Finds the sender(s) from the Authorization header. A server key names no sender by itself:
    /// strict mode looks it up in the config file; permissive mode sends as each token's own sender
    /// (docs/http-api.md, "Which sender a legacy request sends as").
    func legacyCaller(_ request: Request) -> LegacyCaller {
        let key: String
        switch AuthorizationHeader.parse(request.headers[.authorization]) {
        case .missing:
            return .refused("the request has no Authorization header; send Authorization: key=SERVER_KEY")
        case .malformed:
            return .refused("the Authorization header must be key=SERVER_KEY")
        case .key(let k):
            guard !k.isEmpty else { return .refused("the server key is empty") }
            key = k
        case .bearer(let token):
            guard case .success(let grant) = tokens.check(token, nowMillis: engine.clock.nowMillis()) else {
                return .refused("the Bearer token is not one this emulator issued, or it has expired")
            }
            guard let project = grant.projectID else { return strict ? .refused("the Bearer token names no project") : .choice(.tokensOwn(key: nil)) }
            switch senderChoice(project: project) {
            case .success(let choice): return .choice(choice)
            case .failure: return .refused("project \(project) is not a configured sender (--auth strict)")
            }
        }
        guard strict else { return .choice(.tokensOwn(key: key)) }
        let candidates = engine.configuration.configuredSenders.filter { $0.value == key }.map(\.key).sorted()
        if candidates.isEmpty { return .refused("the server key is not in the --config file (--auth strict)") }
        return .choice(candidates.count == 1 ? .fixed(candidates[0]) : .configured(candidates))
    }

    func legacySend(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let caller: SenderChoice
        switch legacyCaller(request) {
        case .refused(let reason): return Self.plainText(status: .unauthorized, "Unauthorized: \(reason)")
        case .choice(let choice): caller = choice
        }
        let body: String, isJSON: Bool
        switch try await Self.legacyBody(request) {
        case .success(let read): (body, isJSON) = read
        case .failure(let refusal): return refusal.response
        }
        let messageID = Self.newMessageID("http-")
        let decoded = isJSON ? LegacyMessageDecoder.decodeJSON(body, messageID: messageID)
                             : LegacyMessageDecoder.decodeForm(body, messageID: messageID)
        let audited = engine.isAuditing ? AuditedRequest(bodyDigest: AuditedRequest.digest(body)) : AuditedRequest()
        let sendRequest: LegacySendRequest
        switch decoded {
        case .failure(let error):
            return answerRefused(error, body: body, isJSON: isJSON, caller: caller, audited: audited)
        case .success(let r):
            sendRequest = r
        }

        // Who sends to each token (looked up once: the fault check and the send both need it).
        let tokenSenders = senders(for: sendRequest.tokens, caller)
        let faultSender: String? = tokenSenders.first ?? {
            if case .fixed(let s) = caller { return s } else { return nil }
        }()
        if let injected = injectedHTTPError(api: "legacy", sender: faultSender, target: sendRequest.target) {
            if let faultSender {
                auditSend(api: "legacy", sender: faultSender, target: sendRequest.target, status: injected.status,
                          retryAfter: injected.retryAfter, request: audited)
            }
            return Self.injectedLegacyResponse(status: injected.status, retryAfter: injected.retryAfter)
        }

        switch sendRequest.target {
        case .token, .tokens:
            return await legacyTokenSend(sendRequest, senders: tokenSenders, caller: caller, isJSON: isJSON, audited: audited)
        case .apnsDeviceToken:
            // The legacy decoder makes no APNs target: those come through the APNs gateway only.
            return Self.plainText(status: .internalServerError, "InternalServerError")
        case .group(let key):
            // The deprecated `notification_key` field: the same group send as `to` = key.
            let sender = senders(for: [key], caller)[0]
            let results = await engineSend(SendRequest(sender: sender, target: .group(key), message: sendRequest.message,
                                                       origin: SendOrigin(api: .legacy)))
            switch results.first {
            case .group(let outcome)?: return Self.legacyGroupAnswer(outcome, isJSON: isJSON)
            case .refused(let error)?: return Self.legacyJSON(results: [.error(Self.legacyErrorName(error))])
            case .accepted?, .fannedOut?, nil: return Self.plainText(status: .internalServerError, "InternalServerError")
            }
        case .topic, .condition:
            return await legacyTopicSend(sendRequest, caller: caller, isJSON: isJSON, audited: audited)
        }
    }

    /// A send to one token (`to`) or up to 1000 (`registration_ids`): one result per token.
    private func legacyTokenSend(_ sendRequest: LegacySendRequest, senders: [String], caller: SenderChoice,
                                 isJSON: Bool, audited: AuditedRequest) async -> Response {
        let results = await send(sendRequest.message, tokens: sendRequest.tokens, senders: senders)
        if case .tokensOwn(let key?) = caller {
            // Permissive mode: a sender first seen sending to its tokens with this key is known by
            // it from now on, as after a CCS login (a later topic send with the key finds it).
            let accepted = Set(zip(senders, results).compactMap { sender, result -> String? in
                if case .accepted = result { return sender } else { return nil }
            })
            for sender in accepted { engine.provisionSender(sender, key: key) }
        }
        if let sender = senders.first {
            let unregistered = zip(sendRequest.tokens, results).compactMap { token, result -> String? in
                if case .refused(.unregistered) = result { return token } else { return nil }
            }
            let canonical = zip(sendRequest.tokens, results).compactMap { token, result -> (old: String, new: String)? in
                if case .accepted(_, _, let new?) = result { return (token, new) } else { return nil }
            }
            auditSend(api: "legacy", sender: sender, target: sendRequest.target, status: 200, unregistered: unregistered,
                      canonical: canonical, request: audited)
        }
        if case .token = sendRequest.target, case .group(let outcome)? = results.first {
            return Self.legacyGroupAnswer(outcome, isJSON: isJSON)
        }
        let shown: [LegacyResult] = zip(results, senders).map { result, sender in
            switch result {
            case .accepted(_, let id, let canonical):
                return .messageID(shownMessageID(id, dryRun: sendRequest.message.dryRun, sender: sender), canonical: canonical)
            case .refused(let error):
                return .error(Self.legacyErrorName(error))
            case .fannedOut:
                return .error("InternalServerError") // not an answer to a token
            case .group:
                // A key among `registration_ids`: each entry there is a token (FCM took keys in
                // `to` or `notification_key` only), and the engine only sends to groups by `to`.
                return .error("InvalidRegistration")
            }
        }
        if isJSON { return Self.legacyJSON(results: shown) }
        switch shown.first {
        case .messageID(let id, nil)?: return Self.plainText("id=\(id)")
        case .messageID(let id, let canonical?)?: return Self.plainText("id=\(id)\nregistration_id=\(canonical)")
        case .error(let name)?: return Self.plainText("Error=\(name)")
        case nil: return Self.plainText("Error=MissingRegistration")
        }
    }

    /// A send to a topic or a condition: answered with a number, by the sender the caller stands for.
    private func legacyTopicSend(_ sendRequest: LegacySendRequest, caller: SenderChoice, isJSON: Bool,
                                 audited: AuditedRequest) async -> Response {
        let sender: String
        switch caller {
        case .fixed(let s): sender = s
        case .configured(let list): sender = list.first ?? "0"
        case .tokensOwn(let key):
            // A topic belongs to one sender, and a key names none by itself in permissive mode:
            // the sender is the one that logged in over CCS, subscribed tokens or sent to its
            // tokens with this key; else the one sender whose devices hold the topic(s) (apps
            // usually subscribe themselves, so the app server's key may be new here).
            let topics: [String]
            switch sendRequest.target {
            case .topic(let name): topics = [name]
            case .condition(let source): topics = (try? TopicCondition.parse(source).topics) ?? []
            default: topics = []
            }
            guard let key, let known = engine.senders(withServerKey: key).first ?? engine.soleSender(ofTopics: topics) else {
                return Self.plainText(status: .unauthorized,
                    "Unauthorized: no sender is known by this server key; a topic send needs the key a sender logged in with over CCS, subscribed tokens or sent to its tokens with, a topic only one sender's devices hold, or --config")
            }
            engine.provisionSender(known, key: key)
            sender = known
        }
        let results = await engineSend(SendRequest(sender: sender, target: sendRequest.target, message: sendRequest.message,
                                                   origin: SendOrigin(api: .legacy)))
        auditSend(api: "legacy", sender: sender, target: sendRequest.target, status: 200, request: audited)
        switch results.first {
        case .fannedOut(let number)?:
            // FCM answers a topic or condition send with a number, not a string.
            return isJSON ? Self.json(.object(["message_id": .int(number)])) : Self.plainText("id=\(number)")
        case .refused(let error)?:
            return isJSON ? Self.json(.object(["error": .string(Self.legacyErrorName(error))]))
                          : Self.plainText("Error=\(Self.legacyErrorName(error))")
        case .accepted?, .group?, nil: // not answers to a topic or condition
            return Self.plainText(status: .internalServerError, "InternalServerError")
        }
    }

    /// The answer to a body that did not decode, told to the audit as the sender's request.
    func answerRefused(_ error: LegacyRefusal, body: String, isJSON: Bool, caller: SenderChoice,
                       audited: AuditedRequest) -> Response {
        let sender = legacyAuditSender(body: body, isJSON: isJSON, caller)
        switch error {
        case .badRequest(let reason):
            if let sender { auditRefusedRequest(api: "legacy", sender: sender, status: 400, request: audited) }
            return Self.plainText(status: .badRequest, reason)
        case .messageError(let name, let count):
            if let sender {
                var refused = audited
                if name == "MessageTooBig" || name == "InvalidDataKey" { refused.limit = name }
                auditRefusedRequest(api: "legacy", sender: sender, status: 200, request: refused)
            }
            return isJSON ? Self.legacyJSON(results: Array(repeating: .error(name), count: count))
                          : Self.plainText("Error=\(name)")
        }
    }

    /// Whom the audit holds to a request refused before it was decoded: the key's one sender, or the
    /// sender of the first token the JSON body names (nil with the audit off, or when none can be told).
    func legacyAuditSender(body: String, isJSON: Bool, _ caller: SenderChoice) -> String? {
        guard engine.isAuditing else { return nil }
        if case .fixed(let sender) = caller { return sender }
        guard isJSON, let json = try? JSONValue.parse(body),
              let token = json["to"]?.stringValue ?? json["registration_ids"]?.arrayValue?.first?.stringValue
        else { return nil }
        return senders(for: [token], caller).first
    }

    /// The body as text and whether it is JSON, or the 400 that refuses it.
    static func legacyBody(_ request: Request) async throws -> Result<(String, Bool), LegacyBodyRefusal> {
        let kind = bodyKind(contentType: request.headers[.contentType])
        if case .unsupported(let type) = kind {
            return .failure(LegacyBodyRefusal(response: plainText(status: .badRequest, "Content-Type \(type) is not supported: send application/json, or application/x-www-form-urlencoded;charset=UTF-8 for the plain-text form")))
        }
        guard let body = UTF8Body.text(try await request.collectBody(limit: maximumBodyBytes)) else {
            return .failure(LegacyBodyRefusal(response: plainText(status: .badRequest, "JSON_PARSING_ERROR: \(UTF8Body.invalidMessage)")))
        }
        return .success((body, kind == .json || (kind == .sniffed && body.drop(while: \.isWhitespace).first == "{")))
    }

    /// A body refused before it was decoded (its Content-Type, its bytes).
    struct LegacyBodyRefusal: Error {
        let response: Response
    }

    /// What the legacy API reads a body as. FCM's legacy API took JSON (`application/json`) and the
    /// plain-text form (`application/x-www-form-urlencoded`); another type is refused, not guessed at,
    /// so that a JSON body sent as `text/xml` is not silently read as a form with no token in it.
    enum BodyKind: Equatable {
        case json, form
        /// No Content-Type: JSON when the body starts with `{`, else the form (as before).
        case sniffed
        case unsupported(String)
    }

    static func bodyKind(contentType: String?) -> BodyKind {
        guard let contentType else { return .sniffed }
        let type = (contentType.split(separator: ";").first ?? "")
            .trimmingCharacters(in: .whitespaces).lowercased()
        switch type {
        case "application/json": return .json
        case "application/x-www-form-urlencoded": return .form
        // "+json" types (RFC 6839) are JSON too.
        case _ where type.hasPrefix("application/") && type.hasSuffix("+json"): return .json
        default: return .unsupported(contentType)
        }
    }

    enum LegacyResult: Equatable {
        /// `canonical`: the installation's newest token, when the message went to an older one.
        case messageID(String, canonical: String?)
        case error(String)
    }

    static func legacyErrorName(_ error: SendError) -> String {
        switch error {
        case .invalidRegistration: return "InvalidRegistration"
        case .unregistered: return "NotRegistered"
        case .senderMismatch: return "MismatchSenderId"
        case .packageMismatch: return "InvalidPackageName"
        case .invalidTopic: return "InvalidParameters"
        case .groupNotFound: return "NotRegistered"
        case .messageTooBig: return "MessageTooBig"
        case .deviceMessageRateExceeded: return "DeviceMessageRateExceeded"
        case .topicsMessageRateExceeded: return "TopicsMessageRateExceeded"
        case .unavailable: return "Unavailable"
        }
    }

    /// A device-group send (seed 004): 200 `{"success":n,"failure":m}` plus `failed_registration_ids`
    /// when a member failed, even when every member did (the counts say so; the app server retries
    /// with backoff). The plain-text form has no group answer of its own: the same fields as lines.
    static func legacyGroupAnswer(_ outcome: GroupSendOutcome, isJSON: Bool) -> Response {
        if !isJSON {
            var lines = ["success=\(outcome.success)", "failure=\(outcome.failure)"]
            if outcome.failure > 0 { lines.append("failed_registration_ids=" + outcome.failedRegistrationIDs.joined(separator: ",")) }
            return plainText(lines.joined(separator: "\n"))
        }
        var writer = JSONObjectWriter()
        writer.add("success", outcome.success)
        writer.add("failure", outcome.failure)
        if outcome.failure > 0 {
            writer.add("failed_registration_ids", json: .array(outcome.failedRegistrationIDs.map(JSONValue.string)))
        }
        return json(text: writer.finished())
    }

    /// `{"multicast_id":…,"success":n,"failure":n,"canonical_ids":0,"results":[…]}`: all four numbers
    /// always (Google's Java client throws without them), results in request order.
    static func legacyJSON(results: [LegacyResult]) -> Response {
        var success = 0
        var canonicalIDs = 0
        var list: [String] = []
        list.reserveCapacity(results.count)
        for result in results {
            var item = JSONObjectWriter(capacity: 64)
            switch result {
            case .messageID(let id, let canonical):
                success += 1
                item.add("message_id", id)
                if let canonical {
                    canonicalIDs += 1
                    item.add("registration_id", canonical)
                }
            case .error(let name):
                item.add("error", name)
            }
            list.append(item.finished())
        }
        var writer = JSONObjectWriter(capacity: 128 + 64 * results.count)
        // Below 2^53, so that JavaScript clients read it exactly.
        writer.add("multicast_id", Int64.random(in: 1...(1 << 53 - 1)))
        writer.add("success", success)
        writer.add("failure", results.count - success)
        writer.add("canonical_ids", canonicalIDs)
        writer.add("results", rawJSON: "[" + list.joined(separator: ",") + "]")
        return json(text: writer.finished())
    }
}
