import CCSEngine
import CCSProtocol
import PushDomain
import GoogleAuth
import HTTPRequestBody
import Hummingbird
import NIOCore
import PlatformRendering

/// HTTP v1: `POST /v1/projects/{project}/messages:send` with an access token from `/token`.
extension FCMHTTPAPI {
    func v1Send(_ request: Request, project: String) async throws -> Response {
        let authorization = request.headers[.authorization]
        let grant: AccessGrant
        do {
            grant = try bearerGrant(authorization: authorization)
        } catch {
            auditTokenRefused(authorization: authorization, project: project)
            throw error
        }
        try v1Check(grant: grant, project: project)
        guard let text = UTF8Body.text(try await request.collectBody(limit: Self.maximumBodyBytes)) else {
            throw GoogleError.invalidArgument("Invalid JSON payload received. \(UTF8Body.invalidMessage).", field: "",
                                              description: "invalid UTF-8")
        }
        return Self.json(text: try await v1Send(project: project, body: text,
                                                accessTokenID: auditedTokenID(authorization: authorization)))
    }

    /// Scope and project checks, before the body is read.
    func v1Check(grant: AccessGrant, project: String) throws(GoogleError) {
        guard grant.mayMessage else {
            throw GoogleError.permissionDenied("Request had insufficient authentication scopes.")
        }
        guard ProjectID.isValid(project) else {
            throw GoogleError.notFound("Requested entity was not found: \(JSONValue.string(String(project.prefix(80))).encoded()) is not a project id (\(ProjectID.rule)).")
        }
        let choice = try senderChoice(project: project).get()
        if strict, let tokenProject = grant.projectID, tokenProject != project,
           senderChoice(project: tokenProject) != .success(choice) {
            throw GoogleError.permissionDenied(
                "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(project)' (or it may not exist): the access token belongs to project \(tokenProject).")
        }
    }

    /// One `messages:send` once the caller is known to be allowed (`v1Check`): shared by the route
    /// and by each part of `/batch`. Answers the success body (`{"name":…}`).
    func v1Send(project: String, body text: String, accessTokenID: String? = nil) async throws(GoogleError) -> String {
        let choice = try senderChoice(project: project).get()
        let audited = engine.isAuditing
            ? AuditedRequest(bodyDigest: AuditedRequest.digest(text), accessTokenID: accessTokenID) : AuditedRequest()
        let send: V1SendRequest
        do throws(GoogleError) {
            let body: JSONValue
            do throws(JSONParseError) {
                body = try JSONValue.parse(text)
            } catch {
                throw GoogleError.invalidArgument("Invalid JSON payload received. \(error.description).", field: "",
                                                  description: "the body is not valid JSON")
            }
            send = try V1MessageDecoder.decode(body, messageID: Self.newMessageID("http-")).get()
        } catch {
            // Refused before its token was read: a project that names one sender still answers for it.
            if engine.isAuditing, case .fixed(let sender) = choice {
                var refused = audited
                refused.limit = error.brokenLimit
                auditRefusedRequest(api: "v1", sender: sender, status: Int(error.status.code), request: refused)
            }
            throw error
        }

        let sender: String
        switch send.target {
        case .token(let token):
            sender = senders(for: [token], choice)[0]
        default:
            // A topic belongs to one sender; a project name the emulator cannot map names none.
            guard case .fixed(let fixed) = choice else {
                throw GoogleError.permissionDenied(
                    "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(project)': topic and condition sends need a project that names one sender (its project number, or a project in the --config file).")
            }
            sender = fixed
        }
        do throws(GoogleError) {
            if let injected = injectedHTTPError(api: "v1", sender: sender, target: send.target) {
                throw Self.injectedV1Error(status: injected.status, retryAfter: injected.retryAfter)
            }
            // The project's quota counts messages, a dry run too; a refused one is not counted.
            if let projectQuota, let wait = projectQuota.admit(sender: sender, now: engine.clock.nowMillis()) {
                throw GoogleError.quotaExceeded(retryAfterMillis: wait)
            }
            let answer = try await v1Deliver(send, sender: sender, project: project)
            auditSend(api: "v1", sender: sender, target: send.target, status: 200, request: audited)
            return answer
        } catch {
            auditSend(api: "v1", sender: sender, target: send.target, status: Int(error.status.code), retryAfter: error.retryAfter,
                      unregistered: error.fcmErrorCode == "UNREGISTERED" ? Self.tokens(of: send.target) : [], request: audited)
            throw error
        }
    }

    /// The send itself, once the sender is known and no fault was injected.
    func v1Deliver(_ send: V1SendRequest, sender: String, project: String) async throws(GoogleError) -> String {
        let result = await engineSend(SendRequest(sender: sender, target: send.target, message: send.message,
                                                  origin: SendOrigin(api: .v1))).first
            ?? .refused(.unavailable)
        switch result {
        case .fannedOut(let number):
            var writer = JSONObjectWriter()
            writer.add("name", "projects/\(project)/messages/\(send.validateOnly ? "fake_message_id" : String(number))")
            return writer.finished()
        case .accepted(_, let id, _):
            let shown = shownMessageID(id, dryRun: send.validateOnly, sender: sender)
            var writer = JSONObjectWriter()
            writer.add("name", "projects/\(project)/messages/\(shown)")
            return writer.finished()
        case .refused(let error):
            throw Self.googleError(error)
        case .group(let outcome):
            // v1 has no group target of its own; a notification key in `token` reaches the group
            // (the engine tells keys from tokens). v1 has no counts to give: a name when a member
            // took it (or the group is empty), the first member's error when none did.
            if outcome.allFailed, let first = outcome.failed.first { throw Self.googleError(first.error) }
            var writer = JSONObjectWriter()
            writer.add("name", "projects/\(project)/messages/\(shownMessageID(nil, dryRun: send.validateOnly, sender: sender))")
            return writer.finished()
        }
    }

    static func googleError(_ error: SendError) -> GoogleError {
        switch error {
        case .invalidRegistration:
            return .invalidArgument("The registration token is not a valid FCM registration token (message.token)",
                                    field: "message.token", description: "Invalid registration token")
        case .unregistered:
            return .unregistered
        case .senderMismatch:
            return .senderIDMismatch
        case .packageMismatch(_, let package):
            return .invalidArgument(
                "Invalid value at 'message.android.restricted_package_name': the registration token is not for the app \(JSONValue.string(package).encoded())",
                field: "message.android.restricted_package_name", description: "the token belongs to another app")
        case .groupNotFound:
            return .unregistered
        case .invalidTopic(let reason):
            return .invalidArgument("Invalid value at 'message.topic' or 'message.condition': \(reason)",
                                    field: "message.condition", description: reason)
        case .messageTooBig(_, let bytes):
            return .invalidArgument("Message is too big: after translation for the iOS device its APNs payload is \(bytes) bytes, the limit is \(APNsNotification.maximumPayloadBytes)",
                                    field: "message", description: "message is too big")
        case .deviceMessageRateExceeded(_, let millis), .topicsMessageRateExceeded(_, let millis):
            return .quotaExceeded(retryAfterMillis: millis)
        case .unavailable:
            return .unavailable(retryAfter: 1)
        }
    }
}
