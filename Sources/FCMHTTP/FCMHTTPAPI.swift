import DeliveryCore
import CCSEngine
import CCSProtocol
import PushDomain
import Foundation
import GoogleAuth
import HTTPRequestBody
import Hummingbird
import Logging
import NIOCore
import WebPushService

/// FCM's HTTP APIs on the emulator's engine (docs/http-api.md): the legacy send API
/// (`/fcm/send`, `/gcm/send`), HTTP v1 (`/v1/projects/P/messages:send`), Google's OAuth2 token
/// endpoint for service accounts (`/token`), and `POST /emulator/v1/credentials`, which hands out
/// service-account files whose keys the token endpoint knows.
///
/// A message sent here goes through `Engine.send` exactly like one sent over CCS: same queues,
/// same devices, same rules.
public struct FCMHTTPAPI: Sendable {
    public let engine: Engine
    public let keys: ServiceAccountKeyStore
    let tokens: AccessTokenIssuer
    /// The Google ID tokens of the client-side device-group API (ClientDeviceGroupAPI.swift).
    let idTokens: IDTokenIssuer
    let exchange: TokenExchange
    let verifiedGrants = AccessGrantCache()
    /// Named projects → sender IDs (the config file's projects). A project number needs no entry.
    let projectSenders: [String: String]
    /// HTTP v1's per-project quota (`serve --project-message-rate`), per sender; nil: none.
    let projectQuota: ProjectQuota?
    /// What the subscriptions the emulator serves received (Web Push, `WebPushAPI`).
    let webPushInbox = WebPushInbox()
    /// VAPID tokens already verified (an application server reuses its token for hours).
    let verifiedVAPIDTokens = VAPIDTokenCache()

    /// Request bodies larger than this are refused with 413 (1000 tokens of ~180 bytes and a 4 KiB
    /// payload fit many times over).
    static let maximumBodyBytes = 1 << 20
    static let maximumTokenRequestBytes = 64 * 1024

    /// `credentialsDirectory` (DATA_DIR/credentials) holds the issued service-account keys (public
    /// parts) and the secret access tokens are signed with; both survive restarts.
    public init(engine: Engine, credentialsDirectory: String, projectSenders: [String: String] = [:]) throws(CredentialsError) {
        let keys = try ServiceAccountKeyStore(directory: credentialsDirectory)
        let tokens = try AccessTokenIssuer(secretIn: credentialsDirectory)
        let idTokens = try IDTokenIssuer(keyIn: credentialsDirectory)
        self.init(engine: engine, keys: keys, tokens: tokens, idTokens: idTokens, projectSenders: projectSenders)
    }

    /// `idTokens`: a key of its own when not given (kept in memory only).
    public init(engine: Engine, keys: ServiceAccountKeyStore, tokens: AccessTokenIssuer, idTokens: IDTokenIssuer? = nil,
                projectSenders: [String: String] = [:]) {
        self.engine = engine
        self.keys = keys
        self.tokens = tokens
        self.idTokens = idTokens ?? IDTokenIssuer()
        self.projectSenders = projectSenders
        self.projectQuota = engine.configuration.projectMessageRate.map(ProjectQuota.init(rate:))
        self.exchange = TokenExchange(keys: keys, issuer: tokens, verifiesSignatures: engine.configuration.authMode == .strict)
    }

    var strict: Bool { engine.configuration.authMode == .strict }

    public func addRoutes(to router: Router<some RequestContext>) {
        // The audit counts each send request until it is answered (Engine.whileSendRequestOpen).
        router.post("fcm/send") { request, context in
            try await self.engine.whileSendRequestOpen { try await self.legacySend(request, context) }
        }
        router.post("gcm/send") { request, context in
            try await self.engine.whileSendRequestOpen { try await self.legacySend(request, context) }
        }
        addDeviceGroupRoutes(to: router)

        router.post("v1/projects/:project/messages:send") { request, context in
            let project = try context.parameters.require("project")
            return try await self.engine.whileSendRequestOpen { try await self.v1Send(request, project: project) }
        }
        // google-auth's background lookup; this answer means "no regional restriction" and keeps it quiet.
        router.get("v1/projects/:project/serviceAccounts/:email/allowedLocations") { _, _ in
            Self.json(.object(["encodedLocations": "0x0", "locations": .array([])]))
        }
        // The token_uri the emulator writes into service-account files, and Google's own token paths
        // (what a client reaches through a proxy with an unmodified file).
        for path in ["token", "o/oauth2/token", "oauth2/v4/token"] {
            router.post(RouterPath(path)) { request, context in try await self.token(request, logger: context.logger) }
        }
        // Batches of messages:send (googleapiclient's BatchHttpRequest, older SDKs' send_all).
        router.post("batch") { request, _ in try await self.engine.whileSendRequestOpen { try await self.batch(request) } }
        router.post("batch/fcm") { request, _ in try await self.batch(request) }
        router.post("emulator/v1/credentials") { request, _ in try await self.issueCredentials(request) }
        addTopicRoutes(to: router)
        addWebPushRoutes(to: router)
    }

    // MARK: OAuth2

    func token(_ request: Request, logger: Logger) async throws -> Response {
        let body = try await request.collectBody(limit: Self.maximumTokenRequestBytes)
        guard let text = UTF8Body.text(body), let form = FormBody.dictionary(text) else {
            return Self.json(status: .badRequest, TokenExchange.Failure("invalid_request", "the body must be application/x-www-form-urlencoded").json)
        }
        let wallSeconds = Date().timeIntervalSince1970
        switch await exchange.exchange(form: form, engineNowMillis: engine.clock.nowMillis(), wallNowSeconds: wallSeconds) {
        case .success(let success):
            auditTokenFetched(success.accessToken)
            var response = Self.json(success.json)
            response.headers[.cacheControl] = "no-cache, no-store, max-age=0, must-revalidate"
            return response
        case .failure(let failure):
            if let kid = failure.refusedKeyID {
                // At the default level: a foreign service-account file under --auth strict is a
                // setup mistake, and the client library often shows only "Invalid JWT Signature.".
                logger.notice("OAuth2 token refused (--auth strict): Invalid JWT Signature for key id \(kid.isEmpty ? "(none)" : String(kid.prefix(80)))",
                              metadata: ["key_id": "\(kid.prefix(80))", "keys_dir": "\(keys.directory)"])
            }
            return Self.json(status: .badRequest, failure.json)
        }
    }

    func issueCredentials(_ request: Request) async throws -> Response {
        let body = try await request.collectBody(limit: Self.maximumTokenRequestBytes)
        guard let text = UTF8Body.text(body), case .object(let fields)? = try? JSONValue.parse(text.isEmpty ? "{}" : text) else {
            throw FCMAdminError(status: .badRequest, message: "the body must be a JSON object: {\"project_id\":\"P\"}")
        }
        guard case .string(let project)? = fields["project_id"] else {
            throw FCMAdminError(status: .badRequest, message: "project_id (a string) is required: {\"project_id\":\"P\"}")
        }
        guard ProjectID.isValid(project) else {
            throw FCMAdminError(status: .badRequest, message: "invalid project_id \(JSONValue.string(String(project.prefix(80))).encoded()): \(ProjectID.rule)")
        }
        guard let authority = request.head.authority, Self.isHostAndPort(authority) else {
            throw FCMAdminError(status: .badRequest, message: "the request has no usable Host header, needed for token_uri")
        }
        do {
            let file = try keys.issue(projectID: project, tokenURI: "http://\(authority)/token", nowMillis: WallClock().nowMillis())
            return Self.json(file)
        } catch {
            throw FCMAdminError(status: .internalServerError, message: error.description)
        }
    }

    static func isHostAndPort(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 255 && s.utf8.allSatisfy {
            ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A)
                || $0 == 0x2E || $0 == 0x2D || $0 == 0x3A || $0 == 0x5B || $0 == 0x5D
        }
    }

    /// The grant behind the request's `Authorization: Bearer …`, or Google's 401.
    func bearerGrant(authorization: String?) throws(GoogleError) -> AccessGrant {
        guard case .bearer(let token) = AuthorizationHeader.parse(authorization) else { throw GoogleError.missingCredentials }
        let now = engine.clock.nowMillis()
        if let grant = verifiedGrants.grant(for: token) {
            guard now < grant.expiresAtMillis else { throw GoogleError.invalidCredentials }
            return grant
        }
        switch tokens.check(token, nowMillis: now) {
        case .success(let grant):
            verifiedGrants.remember(grant, for: token)
            return grant
        case .failure: throw GoogleError.invalidCredentials
        }
    }

    // MARK: senders

    /// Who a message is sent as.
    enum SenderChoice: Sendable, Equatable {
        /// One sender for every token (a project number, a configured project, a strict-mode key).
        case fixed(String)
        /// Permissive mode, where a server key or a project name names no sender: each token's own
        /// sender; for a token registered to several senders, the one whose recorded server key is
        /// `key`, else the first it registered with.
        case tokensOwn(key: String?)
        /// Strict-mode legacy key shared by several configured senders: for each token the one of
        /// them it is registered to, else the first (which then answers MismatchSenderId).
        case configured([String])
    }

    /// The sender of each token, in order. An unknown token gets any sender: the engine refuses it
    /// before it looks at the sender. A device group's notification key in place of a token is sent
    /// as the group's sender, as a token is sent as its own.
    func senders(for tokens: [String], _ choice: SenderChoice) -> [String] {
        switch choice {
        case .fixed(let sender):
            return Array(repeating: sender, count: tokens.count)
        case .configured(let candidates):
            return tokens.map { token in
                var own = engine.device(token: token)?.senders ?? []
                if own.isEmpty, let owner = engine.deviceGroupOwner(key: token) { own = [owner] }
                return own.first(where: candidates.contains) ?? candidates.first ?? "0"
            }
        case .tokensOwn(let key):
            return tokens.map { token in
                guard let device = engine.device(token: token) else { return engine.deviceGroupOwner(key: token) ?? "0" }
                let own = device.senders
                guard let first = own.first else { return "0" }
                guard own.count > 1, let key else { return first }
                return own.first { engine.serverKey(ofSender: $0) == key } ?? first
            }
        }
    }

    /// The sender for a project (HTTP v1, and legacy requests with a Bearer token).
    func senderChoice(project: String) -> Result<SenderChoice, GoogleError> {
        let denied = GoogleError.permissionDenied(
            "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(project)' (or it may not exist).")
        if let sender = projectSenders[project] {
            if strict && engine.configuration.configuredSenders[sender] == nil { return .failure(denied) }
            return .success(.fixed(sender))
        }
        if ProjectID.isNumber(project) {
            if strict && engine.configuration.configuredSenders[project] == nil { return .failure(denied) }
            return .success(.fixed(project))
        }
        return strict ? .failure(denied) : .success(.tokensOwn(key: nil))
    }

    /// Sends one message to `tokens` (as `senders`, one each) and gives the results in token order.
    /// Tokens of one sender go to the engine as one multicast; several senders' groups run together.
    func send(_ message: Message, tokens: [String], senders: [String]) async -> [SendResult] {
        var groups: [String: [Int]] = [:]
        for (index, sender) in senders.enumerated() { groups[sender, default: []].append(index) }
        if groups.count == 1, let sender = senders.first {
            let target: Target = tokens.count == 1 ? .token(tokens[0]) : .tokens(tokens)
            return await engineSend(SendRequest(sender: sender, target: target, message: message, origin: SendOrigin(api: .legacy)))
        }
        var results = [SendResult](repeating: .refused(.unavailable), count: tokens.count)
        await withTaskGroup(of: ([Int], [SendResult]).self) { group in
            for (sender, indices) in groups {
                let request = SendRequest(sender: sender, target: .tokens(indices.map { tokens[$0] }), message: message,
                                          origin: SendOrigin(api: .legacy))
                group.addTask { (indices, await self.engineSend(request)) }
            }
            for await (indices, answers) in group {
                for (index, answer) in zip(indices, answers) { results[index] = answer }
            }
        }
        return results
    }

    func engineSend(_ request: SendRequest) async -> [SendResult] {
        let engine = self.engine
        return await withCheckedContinuation { continuation in
            engine.send(request) { results in
                engine.recordAnswers(request, results) { error in
                    switch request.origin.api {
                    case .v1:
                        let google = Self.googleError(error)
                        return "HTTP \(google.status.code) \(google.fcmErrorCode ?? google.rpcStatus)"
                    default:
                        return "Error=" + Self.legacyErrorName(error)
                    }
                }
                continuation.resume(returning: results)
            }
        }
    }

    /// The id a result shows: the device's message id; `fake_message_id` for a dry run (as FCM
    /// answers one); for a `time_to_live: 0` message dropped because the device could not take it
    /// at once, an id of the same form that no device will see.
    func shownMessageID(_ deviceMessageID: String?, dryRun: Bool, sender: String) -> String {
        if let deviceMessageID { return deviceMessageID }
        if dryRun { return "fake_message_id" }
        return DeviceMessageID.make(micros: engine.clock.nowMicros(), senderHash: DeviceMessageID.senderHash(sender))
    }

    // MARK: helpers

    static func newMessageID(_ prefix: String) -> String { prefix + RandomText.hex(16) }

    static func json(status: HTTPResponse.Status = .ok, _ value: JSONValue) -> Response {
        json(status: status, text: value.encoded())
    }

    static func json(status: HTTPResponse.Status = .ok, text: String) -> Response {
        Response(status: status, headers: [.contentType: "application/json; charset=UTF-8"],
                 body: .init(byteBuffer: ByteBuffer(string: text + "\n")))
    }

    static func plainText(status: HTTPResponse.Status = .ok, _ text: String) -> Response {
        Response(status: status, headers: [.contentType: "text/plain; charset=UTF-8"],
                 body: .init(byteBuffer: ByteBuffer(string: text + "\n")))
    }
}

/// An error of the emulator's own routes, in the admin API's shape.
struct FCMAdminError: Error, HTTPResponseError {
    var status: HTTPResponse.Status
    var message: String

    func response(from request: Request, context: some RequestContext) throws -> Response {
        let rpc: String = switch status {
        case .badRequest: "INVALID_ARGUMENT"
        case .notFound: "NOT_FOUND"
        default: "INTERNAL"
        }
        return FCMHTTPAPI.json(status: status, .object(["error": .object([
            "code": .int(Int64(status.code)), "message": .string(message), "status": .string(rpc),
        ])]))
    }
}
