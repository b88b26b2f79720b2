import CCSEngine
import CCSProtocol
import PushDomain
import GoogleAuth
import HTTPRequestBody
import Hummingbird
import NIOCore

/// The client-side device-group API (spec §6.3, GCM's "client-side" variant): an Android app manages
/// its user's groups itself with `POST https://android.googleapis.com/gcm/googlenotification`, the
/// `project_id` header and the user's Google ID token in the body (`id_token`) instead of the server
/// key. It shares the groups, limits and answers of the server-side `/fcm/notification` API: a group
/// made on one side is found and changed on the other, with the same errors in the same words.
///
/// The ID token is one the emulator issued (`POST /emulator/v1/id-tokens`, an admin route): it cannot
/// reach Google's keys, so a real Google ID token is refused like a forged one (docs/http-api.md).
extension FCMHTTPAPI {
    func addClientDeviceGroupRoutes(to router: Router<some RequestContext>) {
        router.post("gcm/googlenotification") { request, _ in
            switch self.projectSender(request) {
            case .failure(let refusal): return refusal.response
            case .success(let sender): return try await self.manageDeviceGroup(request, sender: sender, idTokenRequired: true)
            }
        }
        router.post("emulator/v1/id-tokens") { request, _ in try await self.issueIDToken(request) }
    }

    /// The body's `id_token`, verified: signed by this emulator's key, not expired on its clock.
    func checkIDToken(in body: String) -> Result<IDTokenClaims, GroupRefusal> {
        guard case .object(let o)? = try? JSONValue.parse(body) else {
            return .failure(.badRequest("the body must be a JSON object: {\"operation\":\"create\",\"notification_key_name\":…,\"registration_ids\":[…],\"id_token\":…}"))
        }
        let token: String
        switch o["id_token"] {
        case nil, .null?: return .failure(.unauthorized("the request has no id_token; send the user's Google ID token (POST /emulator/v1/id-tokens issues one)"))
        case .string(let t)?: token = t
        case let other?: return .failure(.badRequest("id_token must be a string, got \(other.kindDescription)"))
        }
        switch idTokens.verify(token, nowSeconds: engine.clock.nowMillis() / 1000) {
        case .success(let claims): return .success(claims)
        case .failure(.expired): return .failure(.unauthorized("the id_token has expired"))
        case .failure(.invalid): return .failure(.unauthorized("the id_token is not a Google ID token this emulator issued"))
        }
    }

    /// `POST /emulator/v1/id-tokens` `{"email":"…","audience":"…"}` (audience optional): a Google ID
    /// token for that user, valid for an hour of the engine's clock: `{"id_token":"…","expires_in":3600}`.
    func issueIDToken(_ request: Request) async throws -> Response {
        let body = try await request.collectBody(limit: Self.maximumTokenRequestBytes)
        guard let text = UTF8Body.text(body), case .object(let fields)? = try? JSONValue.parse(text.isEmpty ? "{}" : text) else {
            throw FCMAdminError(status: .badRequest, message: "the body must be a JSON object: {\"email\":\"user@example.com\"}")
        }
        guard case .string(let email)? = fields["email"], Self.isPlausibleEmail(email) else {
            throw FCMAdminError(status: .badRequest, message: "email (a string like user@example.com, at most \(IDTokenIssuer.maximumClaimBytes) bytes) is required")
        }
        var audience = Self.defaultIDTokenAudience
        switch fields["audience"] {
        case nil, .null?: break
        case .string(let a)? where !a.isEmpty && a.utf8.count <= IDTokenIssuer.maximumClaimBytes: audience = a
        case _?: throw FCMAdminError(status: .badRequest, message: "audience must be a non-empty string of at most \(IDTokenIssuer.maximumClaimBytes) bytes")
        }
        let token = idTokens.issue(email: email, audience: audience, nowSeconds: engine.clock.nowMillis() / 1000)
        return Self.json(.object(["id_token": .string(token), "expires_in": .int(IDTokenIssuer.lifetimeSeconds)]))
    }

    /// The audience of a token issued without one: a web client id of the emulator's own making.
    static let defaultIDTokenAudience = "ccs-emulator.apps.googleusercontent.com"

    static func isPlausibleEmail(_ s: String) -> Bool {
        guard !s.isEmpty, s.utf8.count <= IDTokenIssuer.maximumClaimBytes,
              let at = s.firstIndex(of: "@"), at != s.startIndex, s.index(after: at) != s.endIndex else { return false }
        return !s.unicodeScalars.contains { $0.properties.isWhitespace || $0.value < 0x20 }
    }
}
