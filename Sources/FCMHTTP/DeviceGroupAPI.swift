import DeliveryCore
import CCSEngine
import CCSProtocol
import PushDomain
import Foundation
import GoogleAuth
import HTTPRequestBody
import Hummingbird
import NIOCore

/// Device-group management (seed 004, spec §6.3): `POST /fcm/notification` (and `/gcm/notification`)
/// with `create`, `add`, `remove`; `GET …/notification?notification_key_name=NAME`. Every answer is
/// JSON: `{"notification_key":"…"}` or `{"error":"…"}` with the real service's texts where known
/// (docs/http-api.md, "Device groups").
extension FCMHTTPAPI {
    /// Most tokens one request may list (a group has at most 20 members; this only bounds the work).
    static let maximumGroupRequestTokens = 1000
    /// Longest `notification_key_name`, in UTF-8 bytes.
    static let maximumGroupNameBytes = 256

    func addDeviceGroupRoutes(to router: Router<some RequestContext>) {
        for path in ["fcm/notification", "gcm/notification"] {
            router.post(RouterPath(path)) { request, _ in try await self.manageDeviceGroup(request) }
            router.get(RouterPath(path)) { request, _ in self.lookUpDeviceGroup(request) }
        }
        addClientDeviceGroupRoutes(to: router)
    }

    /// A refusal: `{"error":"…"}` with its status.
    struct GroupRefusal: Error {
        var status: HTTPResponse.Status
        var text: String

        static func badRequest(_ text: String) -> GroupRefusal { GroupRefusal(status: .badRequest, text: text) }
        static func unauthorized(_ text: String) -> GroupRefusal { GroupRefusal(status: .unauthorized, text: "Unauthorized: " + text) }

        var response: Response { FCMHTTPAPI.json(status: status, .object(["error": .string(text)])) }
    }

    func manageDeviceGroup(_ request: Request) async throws -> Response {
        switch groupSender(request) {
        case .failure(let refusal): return refusal.response
        case .success(let sender): return try await manageDeviceGroup(request, sender: sender, idTokenRequired: false)
        }
    }

    /// Both sides' management POST once the sender is known; `idTokenRequired`: the client side, whose
    /// body must carry an `id_token` this emulator issued (ClientDeviceGroupAPI.swift).
    func manageDeviceGroup(_ request: Request, sender: String, idTokenRequired: Bool) async throws -> Response {
        guard let body = UTF8Body.text(try await request.collectBody(limit: Self.maximumBodyBytes)) else {
            return Self.json(status: .badRequest, .object(["error": .string("the body must be a JSON object: \(UTF8Body.invalidMessage)")]))
        }
        if idTokenRequired, case .failure(let refusal) = checkIDToken(in: body) { return refusal.response }
        let operation: DeviceGroupOperation
        switch Self.decodeGroupOperation(body) {
        case .failure(let refusal): return refusal.response
        case .success(let op): operation = op
        }
        do {
            let key = try await engine.manageDeviceGroup(sender: sender, operation)
            return Self.json(.object(["notification_key": .string(key)]))
        } catch {
            if case .storeFailure = error {
                return GroupRefusal(status: .internalServerError, text: error.text).response
            }
            return GroupRefusal.badRequest(error.text).response
        }
    }

    func lookUpDeviceGroup(_ request: Request) -> Response {
        let sender: String
        switch groupSender(request) {
        case .failure(let refusal): return refusal.response
        case .success(let s): sender = s
        }
        guard let name = request.uri.queryParameters.get("notification_key_name"), !name.isEmpty else {
            return GroupRefusal.badRequest("notification_key_name is missing: GET …/notification?notification_key_name=NAME").response
        }
        guard let key = engine.deviceGroupKey(sender: sender, name: name) else {
            return GroupRefusal.badRequest(DeviceGroupError.notFound.text).response
        }
        return Self.json(.object(["notification_key": .string(key)]))
    }

    /// The sender a management request acts for: the `project_id` header (a sender ID, or a project
    /// of the config file), after `Authorization: key=` is checked against that sender's server key
    /// (the config file's, or the one it logged in to CCS with). Permissive mode accepts any key for a
    /// sender whose key it does not know; strict mode knows only the config file's senders.
    func groupSender(_ request: Request) -> Result<String, GroupRefusal> {
        let key: String
        switch AuthorizationHeader.parse(request.headers[.authorization]) {
        case .missing:
            return .failure(.unauthorized("the request has no Authorization header; send Authorization: key=SERVER_KEY"))
        case .malformed, .bearer:
            return .failure(.unauthorized("the Authorization header must be key=SERVER_KEY"))
        case .key(let k):
            guard !k.isEmpty else { return .failure(.unauthorized("the server key is empty")) }
            key = k
        }

        let sender: String
        switch projectSender(request) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let s): sender = s
        }
        if let expected = engine.serverKey(ofSender: sender), expected != key {
            return .failure(.unauthorized("the server key is not the key of sender \(sender) (project_id)"))
        }
        return .success(sender)
    }

    /// The sender the `project_id` header names (a sender ID, or a project of the config file); in
    /// strict mode only the config file's senders. Shared by both sides of the API.
    func projectSender(_ request: Request) -> Result<String, GroupRefusal> {
        guard let project = request.headers[.init("project_id")!]?.trimmingCharacters(in: .whitespaces),
              !project.isEmpty else {
            return .failure(.badRequest("the project_id header is missing: send project_id: SENDER_ID"))
        }
        let sender: String
        if let mapped = projectSenders[project] {
            sender = mapped
        } else if ProjectID.isNumber(project), project.utf8.count <= 32 {
            sender = project
        } else {
            return .failure(.badRequest("project_id \(JSONValue.string(String(project.prefix(64))).encoded()) is not a sender ID (a project number)"))
        }
        if strict && engine.configuration.configuredSenders[sender] == nil {
            return .failure(.unauthorized("sender \(sender) is not in the --config file (--auth strict)"))
        }
        return .success(sender)
    }

    /// The body of a management POST, range-checked: `operation`, `notification_key_name`,
    /// `notification_key`, `registration_ids` (1 … 1000 strings).
    static func decodeGroupOperation(_ text: String) -> Result<DeviceGroupOperation, GroupRefusal> {
        guard case .object(let o)? = try? JSONValue.parse(text) else {
            return .failure(.badRequest("the body must be a JSON object: {\"operation\":\"create\",\"notification_key_name\":…,\"registration_ids\":[…]}"))
        }
        func optionalString(_ field: String) -> Result<String?, GroupRefusal> {
            switch o[field] {
            case nil, .null?: return .success(nil)
            case .string(let s)?: return .success(s.isEmpty ? nil : s)
            case let other?: return .failure(.badRequest("\(field) must be a string, got \(other.kindDescription)"))
            }
        }
        let operationName: String
        switch optionalString("operation") {
        case .failure(let r): return .failure(r)
        case .success(let s?): operationName = s
        case .success(nil): return .failure(.badRequest("operation is missing: \"create\", \"add\" or \"remove\""))
        }
        let name: String?, key: String?
        switch optionalString("notification_key_name") {
        case .failure(let r): return .failure(r)
        case .success(let s): name = s
        }
        if let name, name.utf8.count > maximumGroupNameBytes {
            return .failure(.badRequest("notification_key_name is longer than \(maximumGroupNameBytes) bytes"))
        }
        switch optionalString("notification_key") {
        case .failure(let r): return .failure(r)
        case .success(let s): key = s
        }
        var tokens: [String] = []
        switch o["registration_ids"] {
        case .array(let items)?:
            if items.count > maximumGroupRequestTokens {
                return .failure(.badRequest("registration_ids lists \(items.count) tokens; at most \(maximumGroupRequestTokens)"))
            }
            for item in items {
                guard case .string(let t) = item else {
                    return .failure(.badRequest("registration_ids must be an array of strings, found \(item.kindDescription)"))
                }
                tokens.append(t)
            }
        case nil, .null?:
            break // none: "no valid registration ids" below, as for an empty list
        case let other?:
            return .failure(.badRequest("registration_ids must be an array of strings, got \(other.kindDescription)"))
        }
        switch operationName.lowercased() {
        case "create":
            guard let name else { return .failure(.badRequest("notification_key_name is missing: a group is created with a name")) }
            return .success(.create(name: name, tokens: tokens))
        case "add", "remove":
            guard let key else { return .failure(.badRequest("notification_key is missing: \(operationName.lowercased()) needs the group's key")) }
            return .success(operationName.lowercased() == "add" ? .add(key: key, name: name, tokens: tokens)
                                                               : .remove(key: key, name: name, tokens: tokens))
        default:
            return .failure(.badRequest("operation \(JSONValue.string(String(operationName.prefix(64))).encoded()) is not \"create\", \"add\" or \"remove\""))
        }
    }
}
