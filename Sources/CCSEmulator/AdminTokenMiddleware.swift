import Hummingbird
import NIOCore

/// `--admin-token`: every admin route (under `/emulator/v1/`, with the service-account files of
/// `/emulator/v1/credentials`, and `/metrics`) wants `Authorization: Bearer TOKEN`, except the
/// liveness check and the CA certificate, which are public. Without a token the emulator refuses a
/// non-loopback `--bind`, so the admin API is never open beyond the machine (docs/hardening.md).
///
/// Router middleware runs once the route is resolved, so the check reads the route that will answer
/// (`AdminRoutes`), not the path as written: no spelling of a path reaches an admin route unchecked.
struct AdminTokenMiddleware<Context: RequestContext>: RouterMiddleware {
    let token: String

    func handle(_ request: Request, context: Context,
                next: (Request, Context) async throws -> Response) async throws -> Response {
        guard AdminRoutes.kind(ofEndpoint: context.endpointPath) == .admin else {
            return try await next(request, context)
        }
        guard let given = request.headers[.authorization], Self.matches(given, "Bearer " + token) else {
            var body = ByteBuffer()
            body.writeString(#"{"error":{"code":401,"message":"the admin API wants Authorization: Bearer <the --admin-token>","status":"UNAUTHENTICATED"}}"# + "\n")
            return Response(status: .unauthorized,
                            headers: [.contentType: "application/json", .wwwAuthenticate: "Bearer realm=\"ccs-emulator\""],
                            body: .init(byteBuffer: body))
        }
        return try await next(request, context)
    }

    /// Constant time in the length of the expected value: the comparison does not tell how much of a
    /// guess was right.
    static func matches(_ given: String, _ expected: String) -> Bool {
        let a = Array(given.utf8), b = Array(expected.utf8)
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<b.count { difference |= (i < a.count ? a[i] : 0) ^ b[i] }
        return difference == 0
    }
}
