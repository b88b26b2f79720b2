import CCSProtocol
import PushDomain
import Hummingbird
import NIOCore

/// An error in Google's API shape (google.rpc.Status as JSON):
/// `{"error":{"code":404,"message":"…","status":"NOT_FOUND","details":[…]}}`, with the
/// `google.firebase.fcm.v1.FcmError` detail that admin SDKs map first, and for INVALID_ARGUMENT a
/// `google.rpc.BadRequest` detail naming the field.
struct GoogleError: Error, HTTPResponseError, Equatable {
    var status: HTTPResponse.Status
    /// google.rpc.Code name: INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, UNAUTHENTICATED, …
    var rpcStatus: String
    var message: String
    /// `FcmError.errorCode`: INVALID_ARGUMENT, UNREGISTERED, SENDER_ID_MISMATCH, QUOTA_EXCEEDED,
    /// UNAVAILABLE, INTERNAL, THIRD_PARTY_AUTH_ERROR; nil for errors that are not FCM's own
    /// (authentication, permission on the project).
    var fcmErrorCode: String?
    /// `google.rpc.BadRequest.fieldViolations[0]`: the field path and what is wrong with it.
    var fieldViolation: (field: String, description: String)?
    /// Seconds, for 429 and 503.
    var retryAfter: Int?
    var extraHeaders: HTTPFields = [:]

    static func == (a: GoogleError, b: GoogleError) -> Bool {
        a.status == b.status && a.rpcStatus == b.rpcStatus && a.message == b.message && a.fcmErrorCode == b.fcmErrorCode
            && a.fieldViolation?.field == b.fieldViolation?.field && a.retryAfter == b.retryAfter
    }

    static func invalidArgument(_ message: String, field: String, description: String? = nil) -> GoogleError {
        GoogleError(status: .badRequest, rpcStatus: "INVALID_ARGUMENT", message: message, fcmErrorCode: "INVALID_ARGUMENT",
                    fieldViolation: (field, description ?? message))
    }

    static let unregistered = GoogleError(status: .notFound, rpcStatus: "NOT_FOUND", message: "Requested entity was not found.",
                                          fcmErrorCode: "UNREGISTERED")
    static let senderIDMismatch = GoogleError(status: .forbidden, rpcStatus: "PERMISSION_DENIED", message: "SenderId mismatch",
                                              fcmErrorCode: "SENDER_ID_MISMATCH")
    static let internalError = GoogleError(status: .internalServerError, rpcStatus: "INTERNAL",
                                           message: "Internal error encountered.", fcmErrorCode: "INTERNAL")
    static func quotaExceeded(retryAfter: Int) -> GoogleError {
        GoogleError(status: .tooManyRequests, rpcStatus: "RESOURCE_EXHAUSTED", message: "Quota exceeded for sending messages.",
                    fcmErrorCode: "QUOTA_EXCEEDED", retryAfter: retryAfter)
    }
    /// The same for a wait known in milliseconds (a rate limit): whole seconds, rounded up, so that a
    /// client that waits `Retry-After` finds room.
    static func quotaExceeded(retryAfterMillis millis: Int64) -> GoogleError {
        quotaExceeded(retryAfter: Int(max(1, (millis + 999) / 1000)))
    }
    static func unavailable(retryAfter: Int) -> GoogleError {
        GoogleError(status: .serviceUnavailable, rpcStatus: "UNAVAILABLE", message: "The service is currently unavailable.",
                    fcmErrorCode: "UNAVAILABLE", retryAfter: retryAfter)
    }
    static func permissionDenied(_ message: String) -> GoogleError {
        GoogleError(status: .forbidden, rpcStatus: "PERMISSION_DENIED", message: message, fcmErrorCode: nil)
    }
    static func notFound(_ message: String) -> GoogleError {
        GoogleError(status: .notFound, rpcStatus: "NOT_FOUND", message: message, fcmErrorCode: nil)
    }

    /// Google's answer when a request carries no credentials.
    static let missingCredentials = unauthenticated(
        "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
        invalidToken: false)
    /// Google's answer for a token it did not issue, or one that expired.
    static let invalidCredentials = unauthenticated(
        "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
        invalidToken: true)

    static func unauthenticated(_ message: String, invalidToken: Bool) -> GoogleError {
        var error = GoogleError(status: .unauthorized, rpcStatus: "UNAUTHENTICATED", message: message, fcmErrorCode: nil)
        error.extraHeaders[.wwwAuthenticate] = invalidToken
            ? "Bearer realm=\"https://accounts.google.com/\", error=\"invalid_token\""
            : "Bearer realm=\"https://accounts.google.com/\""
        return error
    }

    var json: String {
        var error = JSONObjectWriter()
        error.add("code", Int(status.code))
        error.add("message", message)
        error.add("status", rpcStatus)
        var details: [String] = []
        if let fcmErrorCode {
            var detail = JSONObjectWriter()
            detail.add("@type", "type.googleapis.com/google.firebase.fcm.v1.FcmError")
            detail.add("errorCode", fcmErrorCode)
            details.append(detail.finished())
        }
        if let fieldViolation {
            var violation = JSONObjectWriter()
            violation.add("field", fieldViolation.field)
            violation.add("description", fieldViolation.description)
            var detail = JSONObjectWriter()
            detail.add("@type", "type.googleapis.com/google.rpc.BadRequest")
            detail.add("fieldViolations", rawJSON: "[" + violation.finished() + "]")
            details.append(detail.finished())
        }
        if !details.isEmpty { error.add("details", rawJSON: "[" + details.joined(separator: ",") + "]") }
        var outer = JSONObjectWriter()
        outer.add("error", rawJSON: error.finished())
        return outer.finished()
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = extraHeaders
        headers[.contentType] = "application/json; charset=UTF-8"
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: json + "\n")))
    }
}
