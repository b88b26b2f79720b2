/// Which routes are the emulator's own controls (the admin API, the dashboard, the metrics), decided
/// on the route the router resolved (`context.endpointPath`), never on the raw request path: the
/// router skips empty segments and decodes percent-escapes, so `//emulator/v1/info` and
/// `/emulator%2Fv1/info` reach the same route as `/emulator/v1/info` and must meet the same checks.
enum AdminRoutes {
    enum Kind: Equatable {
        /// Public even under `--admin-token`: the liveness check and the CA certificate.
        case publicAdmin
        /// Under `/emulator/v1/`, `/metrics`: the token applies.
        case admin
        /// The dashboard's page and assets: no token (the page asks for one), but the Host rule.
        case dashboard
        /// The FCM and Google APIs, which proxy mode reaches under Google's host names.
        case pushService
    }

    static let publicPaths: Set<String> = ["/emulator/v1/health", "/emulator/v1/ca.pem"]

    /// The kind of a resolved route (`endpointPath`, e.g. `/emulator/v1/devices/:token`). Nil (no route
    /// matched: the answer is a 404 that tells nothing) counts as a push-service route.
    static func kind(ofEndpoint path: String?) -> Kind {
        guard var path else { return .pushService }
        if !path.hasPrefix("/") { path = "/" + path }
        if publicPaths.contains(path) { return .publicAdmin }
        if path == "/emulator/v1" || path.hasPrefix("/emulator/v1/") || path == "/metrics" { return .admin }
        if path == "/" || path == "/dashboard" || path.hasPrefix("/dashboard/") { return .dashboard }
        return .pushService
    }
}
