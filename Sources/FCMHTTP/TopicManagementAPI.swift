import DeliveryCore
import CCSEngine
import CCSProtocol
import PushDomain
import Foundation
import GoogleAuth
import HTTPRequestBody
import Hummingbird
import NIOCore

/// Topic subscriptions over HTTP, as app servers change them: the Instance ID API
/// (`iid.googleapis.com`: `/iid/v1/TOKEN/rel/topics/T`, `/iid/v1:batchAdd`, `/iid/v1:batchRemove`,
/// `/iid/info/TOKEN`) with `Authorization: key=` or a Bearer token, and the v1 registrations API newer
/// admin SDKs call (`/v1/projects/P/registrations/TOKEN/topicSubscriptions`).
extension FCMHTTPAPI {
    /// FCM's most tokens per batch request.
    static let maximumBatchTokens = 1000

    func addTopicRoutes(to router: Router<some RequestContext>) {
        router.post("iid/v1/:token/rel/topics/:topic") { request, context in
            try await self.iidSubscribeOne(request, token: Self.pathParameter(context, "token"), topic: Self.pathParameter(context, "topic"))
        }
        router.post("iid/v1:batchAdd") { request, _ in try await self.iidBatch(request, subscribe: true) }
        router.post("iid/v1:batchRemove") { request, _ in try await self.iidBatch(request, subscribe: false) }
        router.get("iid/info/:token") { request, context in
            try self.iidInfo(request, token: Self.pathParameter(context, "token"))
        }
        router.post("v1/projects/:project/registrations/:token/topicSubscriptions") { request, context in
            try await self.v1Subscribe(request, project: Self.pathParameter(context, "project"),
                                       token: Self.pathParameter(context, "token"))
        }
        router.delete("v1/projects/:project/registrations/:token/topicSubscriptions/:topic") { request, context in
            try await self.v1Unsubscribe(request, project: Self.pathParameter(context, "project"),
                                         token: Self.pathParameter(context, "token"), topic: Self.pathParameter(context, "topic"))
        }
    }

    /// Clients percent-encode tokens (`:` → `%3A`) and topics in the path; the router hands the raw segment.
    static func pathParameter(_ context: some RequestContext, _ name: String) throws -> String {
        let raw = try context.parameters.require(name)
        return raw.removingPercentEncoding ?? raw
    }

    // MARK: Instance ID

    /// Instance ID answers errors as `{"error":"CODE"}`.
    static func iidError(_ status: HTTPResponse.Status, _ code: String, _ reason: String? = nil) -> Response {
        var fields: [String: JSONValue] = ["error": .string(code)]
        if let reason { fields["reason"] = .string(reason) }
        return json(status: status, .object(fields))
    }

    /// Who calls, as the legacy send API finds it; nil with the 401 answer.
    private func iidCaller(_ request: Request) -> Result<SenderChoice, IIDRefusal> {
        switch legacyCaller(request) {
        case .refused(let reason): return .failure(IIDRefusal(response: Self.iidError(.unauthorized, "Unauthorized", reason)))
        case .choice(let choice): return .success(choice)
        }
    }

    struct IIDRefusal: Error { var response: Response }

    /// The sender each token is changed for; in permissive mode a key seen here is recorded for the
    /// token's sender, so that a later legacy topic send with that key finds the sender.
    private func changes(_ tokens: [String], _ choice: SenderChoice, request: Request) -> [TopicSubscriptionChange] {
        let senders = senders(for: tokens, choice)
        if case .tokensOwn(let key?) = choice {
            for (token, sender) in zip(tokens, senders) where engine.device(token: token) != nil {
                engine.provisionSender(sender, key: key)
            }
        }
        return zip(tokens, senders).map { TopicSubscriptionChange(token: $0, senderID: $1) }
    }

    /// `to` may carry the `/topics/` prefix (Instance ID batch bodies always do).
    static func topicName(_ raw: String) -> String? {
        let name = raw.hasPrefix(DownstreamTarget.topicPrefix) ? String(raw.dropFirst(DownstreamTarget.topicPrefix.count)) : raw
        return DownstreamTarget.isValidTopicName(name) ? name : nil
    }

    static let topicRule = "topic names match [a-zA-Z0-9-_.~%]{1,\(DownstreamTarget.maximumTopicNameLength)}"

    static func iidCode(_ error: TopicSubscriptionError) -> (HTTPResponse.Status, String) {
        switch error {
        case .notFound, .notSubscribed: return (.notFound, "NOT_FOUND")
        case .senderMismatch: return (.forbidden, "PERMISSION_DENIED")
        case .tooManyTopics: return (.badRequest, "TOO_MANY_TOPICS")
        case .internalError: return (.internalServerError, "INTERNAL")
        }
    }

    func iidSubscribeOne(_ request: Request, token: String, topic raw: String) async throws -> Response {
        let choice: SenderChoice
        switch iidCaller(request) {
        case .failure(let refusal): return refusal.response
        case .success(let c): choice = c
        }
        guard let topic = Self.topicName(raw) else { return Self.iidError(.badRequest, "INVALID_ARGUMENT", Self.topicRule) }
        let results = await engine.subscribe(changes([token], choice, request: request), to: topic)
        if case .failure(let error) = results[0] {
            let (status, code) = Self.iidCode(error)
            return Self.iidError(status, code)
        }
        return Self.json(.object([:]))
    }

    func iidBatch(_ request: Request, subscribe: Bool) async throws -> Response {
        let choice: SenderChoice
        switch iidCaller(request) {
        case .failure(let refusal): return refusal.response
        case .success(let c): choice = c
        }
        guard let text = UTF8Body.text(try await request.collectBody(limit: Self.maximumBodyBytes)) else {
            return Self.iidError(.badRequest, "INVALID_ARGUMENT", UTF8Body.invalidMessage)
        }
        let batch: IIDBatchBody
        switch Self.decodeIIDBatch(text) {
        case .failure(let error): return Self.iidError(.badRequest, "INVALID_ARGUMENT", error.reason)
        case .success(let b): batch = b
        }
        // A token that is not a non-empty string gets INVALID_ARGUMENT in its place; the others go on.
        var tokens: [String] = []
        var positions: [Int] = []
        var answers = [JSONValue](repeating: .object(["error": "INVALID_ARGUMENT"]), count: batch.tokens.count)
        for (index, token) in batch.tokens.enumerated() {
            if let token {
                tokens.append(token)
                positions.append(index)
            }
        }
        let topic = batch.topic
        let changes = changes(tokens, choice, request: request)
        let results = subscribe ? await engine.subscribe(changes, to: topic)
                                : await engine.unsubscribe(changes, from: topic, allowMissing: true)
        for (index, result) in zip(positions, results) {
            switch result {
            case .success: answers[index] = .object([:])
            case .failure(let error): answers[index] = .object(["error": .string(Self.iidCode(error).1)])
            }
        }
        return Self.json(.object(["results": .array(answers)]))
    }

    /// An Instance ID batchAdd / batchRemove body: the topic, and the tokens in request order (nil
    /// where an item is not a usable token).
    struct IIDBatchBody: Equatable {
        var topic: String
        var tokens: [String?]
    }

    struct IIDBodyError: Error, Equatable { var reason: String }

    /// Decodes an Instance ID batch body; the error's reason goes into the 400 answer.
    static func decodeIIDBatch(_ text: String) -> Result<IIDBatchBody, IIDBodyError> {
        guard case .object(let body)? = try? JSONValue.parse(text) else {
            return .failure(IIDBodyError(reason: "the body must be a JSON object with \"to\" and \"registration_tokens\""))
        }
        guard case .string(let to)? = body["to"] else {
            return .failure(IIDBodyError(reason: "\"to\" (/topics/NAME) is required"))
        }
        guard let topic = topicName(to) else { return .failure(IIDBodyError(reason: topicRule)) }
        guard case .array(let list)? = body["registration_tokens"] else {
            return .failure(IIDBodyError(reason: "\"registration_tokens\" (an array of tokens) is required"))
        }
        guard !list.isEmpty, list.count <= maximumBatchTokens else {
            return .failure(IIDBodyError(reason: "\"registration_tokens\" must hold 1 to \(maximumBatchTokens) tokens, got \(list.count)"))
        }
        return .success(IIDBatchBody(topic: topic, tokens: list.map { item in
            if case .string(let token) = item, !token.isEmpty, token.utf8.count <= 4096 { return token }
            return nil
        }))
    }

    func iidInfo(_ request: Request, token: String) throws -> Response {
        let choice: SenderChoice
        switch iidCaller(request) {
        case .failure(let refusal): return refusal.response
        case .success(let c): choice = c
        }
        guard let device = engine.device(token: token), device.status == .active else {
            return Self.iidError(.notFound, "No information found about this instance id.")
        }
        let sender = senders(for: [token], choice)[0]
        guard device.senders.contains(sender) else {
            return Self.iidError(.forbidden, "PERMISSION_DENIED", "the token is not registered for the caller's sender")
        }
        var fields: [String: JSONValue] = [
            "application": .string(device.app),
            "authorizedEntity": .string(sender),
            "applicationVersion": "1",
            "platform": .string(device.platform.instanceIDName),
        ]
        let details = request.uri.queryParameters.get("details")?.lowercased() == "true"
        if details {
            var topics: [String: JSONValue] = [:]
            for (name, at) in engine.topics(token: token, senderID: sender) ?? [:] {
                topics[name] = .object(["addDate": .string(Self.day(millis: at))])
            }
            fields["connectionType"] = engine.isOnline(token: token) ? "WIFI" : "NONE"
            if !topics.isEmpty { fields["rel"] = .object(["topics": .object(topics)]) }
        }
        return Self.json(.object(fields))
    }

    /// `2015-07-30`: Instance ID gives subscription dates as days (UTC).
    static func day(millis: Int64) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        return formatter.string(from: Date(timeIntervalSince1970: Double(millis) / 1000))
    }

    // MARK: v1 registrations

    private func v1Caller(_ request: Request, project: String) throws(GoogleError) -> SenderChoice {
        let grant = try bearerGrant(authorization: request.headers[.authorization])
        guard grant.mayMessage else { throw GoogleError.permissionDenied("Request had insufficient authentication scopes.") }
        guard ProjectID.isValid(project) else {
            throw GoogleError.notFound("Requested entity was not found: \(JSONValue.string(String(project.prefix(80))).encoded()) is not a project id (\(ProjectID.rule)).")
        }
        return try senderChoice(project: project).get()
    }

    static func v1Error(_ error: TopicSubscriptionError) -> GoogleError {
        switch error {
        case .notFound: return .notFound("Requested entity was not found: the registration token is unknown or its app was uninstalled.")
        case .notSubscribed: return .notFound("Requested entity was not found: the registration token is not subscribed to this topic.")
        case .senderMismatch: return .senderIDMismatch
        case .tooManyTopics:
            return .invalidArgument("The app instance is subscribed to \(Engine.maximumTopicsPerToken) topics, the most FCM allows (TOO_MANY_TOPICS).",
                                    field: "topic_name", description: "TOO_MANY_TOPICS")
        case .internalError: return .internalError
        }
    }

    func v1Subscribe(_ request: Request, project: String, token: String) async throws -> Response {
        let choice = try v1Caller(request, project: project)
        guard let raw = request.uri.queryParameters.get("topic_name") else {
            throw GoogleError.invalidArgument("Missing required parameter 'topic_name'.", field: "topic_name")
        }
        guard let topic = Self.topicName(raw) else {
            throw GoogleError.invalidArgument("Invalid value at 'topic_name': \(Self.topicRule).", field: "topic_name")
        }
        let results = await engine.subscribe(changes([token], choice, request: request), to: topic)
        if case .failure(let error) = results[0] { throw Self.v1Error(error) }
        return Self.json(.object(["name": .string("projects/\(project)/registrations/\(token)/topicSubscriptions/\(topic)")]))
    }

    func v1Unsubscribe(_ request: Request, project: String, token: String, topic raw: String) async throws -> Response {
        let choice = try v1Caller(request, project: project)
        guard let topic = Self.topicName(raw) else {
            throw GoogleError.invalidArgument("Invalid value at 'topic': \(Self.topicRule).", field: "topic")
        }
        let allowMissing = request.uri.queryParameters.get("allow_missing")?.lowercased() == "true"
        let results = await engine.unsubscribe(changes([token], choice, request: request), from: topic, allowMissing: allowMissing)
        if case .failure(let error) = results[0] { throw Self.v1Error(error) }
        return Self.json(.object([:]))
    }
}

extension Platform {
    /// The Instance ID info API's `platform` (web: UNCONFIRMED, docs/platforms.md).
    var instanceIDName: String {
        switch self {
        case .android: "ANDROID"
        case .ios: "IOS"
        case .web: "WEBPUSH"
        }
    }
}
