import CCSProtocol
import PushDomain
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// What keeps web pages away from the admin API and the dashboard (docs/hardening.md, "Threat
/// model"). The emulator runs beside a browser: any page can send a request to 127.0.0.1, and a page
/// whose DNS name is rebound to 127.0.0.1 can even read the answers. So, for admin and dashboard
/// routes:
///
/// - `Host` must name this machine (a loopback name or address, the bound address) or a name given
///   with `serve --public-host`: a rebound name is refused (403), so nothing is read through it and no
///   `token_uri` is built from it.
/// - A state-changing request (POST, PUT, PATCH, DELETE) from another origin (`Origin` not this
///   server's own, or `Sec-Fetch-Site: cross-site` / `same-site`) is refused (403).
/// - A request with a body must say `Content-Type: application/json` (415): a page can send
///   `text/plain` across origins without asking, but not JSON.
///
/// The FCM and Google API routes are not guarded here: proxy mode reaches them under Google's host
/// names, and their callers are app servers, not browsers.
struct AdminRequestGuard<Context: RequestContext>: RouterMiddleware {
    let policy: HostPolicy

    func handle(_ request: Request, context: Context,
                next: (Request, Context) async throws -> Response) async throws -> Response {
        switch AdminRoutes.kind(ofEndpoint: context.endpointPath) {
        case .pushService: return try await next(request, context)
        case .publicAdmin, .admin, .dashboard: break
        }
        if let refusal = policy.refusal(of: AdminRequestFacts(request)) {
            return Self.response(refusal)
        }
        return try await next(request, context)
    }

    static func response(_ refusal: AdminRequestRefusal) -> Response {
        let (status, googleStatus): (HTTPResponse.Status, String) = switch refusal {
        case .hostNotAllowed, .crossOrigin: (.forbidden, "PERMISSION_DENIED")
        case .notJSON: (.unsupportedMediaType, "INVALID_ARGUMENT")
        }
        let body = #"{"error":{"code":"# + "\(status.code)" + #","message":"# + JSONValue.string(refusal.message).encoded()
            + #","status":""# + googleStatus + "\"}}\n"
        var headers: HTTPFields = [.contentType: "application/json"]
        if case .notJSON = refusal {} else { headers[.connection] = "close" }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}

/// The parts of a request the guard looks at (a value, so the rules are tested without a server).
struct AdminRequestFacts: Equatable {
    var method: HTTPRequest.Method
    var host: String?
    var origin: String?
    var secFetchSite: String?
    var contentType: String?
    var hasBody: Bool

    init(method: HTTPRequest.Method, host: String?, origin: String? = nil, secFetchSite: String? = nil,
         contentType: String? = nil, hasBody: Bool = false) {
        self.method = method
        self.host = host
        self.origin = origin
        self.secFetchSite = secFetchSite
        self.contentType = contentType
        self.hasBody = hasBody
    }

    init(_ request: Request) {
        let h = request.headers
        // :authority in HTTP/2; HTTP/1.1's Host, which the conversion to HTTP types moves there.
        let host = request.head.authority
        let length = h[.contentLength].map { $0 != "0" } ?? false
        self.init(method: request.method, host: host, origin: h[.origin],
                  secFetchSite: h[HTTPField.Name("Sec-Fetch-Site")!], contentType: h[.contentType],
                  hasBody: length || h[.transferEncoding] != nil)
    }
}

enum AdminRequestRefusal: Equatable {
    case hostNotAllowed(String)
    case crossOrigin(String)
    case notJSON(String?)

    var message: String {
        switch self {
        case .hostNotAllowed(let host):
            return "Host \(host) is not this emulator's: the admin API and the dashboard answer only to a loopback name or address, the --bind address, or a name given with serve --public-host NAME (a guard against DNS rebinding, docs/hardening.md)"
        case .crossOrigin(let origin):
            return "a state-changing admin request from another origin (\(origin)) is refused: send it from this server's own origin, or without Origin and Sec-Fetch-Site (curl, scripts) (docs/hardening.md)"
        case .notJSON(let type):
            return "an admin request with a body must be Content-Type: application/json (got \(type ?? "none"))"
        }
    }
}

/// The host names the admin API answers to, and the rules for a request.
struct HostPolicy: Sendable {
    /// Lower-cased names or addresses, without port or brackets.
    let allowedHosts: Set<String>

    init(bindHost: String, publicHosts: [String]) {
        var hosts: Set<String> = ["localhost", "127.0.0.1", "::1"]
        hosts.insert(Self.bare(bindHost))
        for name in publicHosts { hosts.insert(Self.bare(name)) }
        allowedHosts = hosts
    }

    func refusal(of r: AdminRequestFacts) -> AdminRequestRefusal? {
        // HTTP/1.1 requires Host (RFC 9112 §3.2); a request without one is refused like a foreign one.
        guard let host = r.host, allows(host: host) else { return .hostNotAllowed(r.host ?? "(none)") }
        if r.method == .post || r.method == .put || r.method == .patch || r.method == .delete {
            if let site = r.secFetchSite?.lowercased(), site == "cross-site" || site == "same-site" {
                return .crossOrigin(r.origin ?? "Sec-Fetch-Site: \(site)")
            }
            if let origin = r.origin, !Self.isSameOrigin(origin, host: host) { return .crossOrigin(origin) }
            if r.hasBody, !Self.isJSON(r.contentType) { return .notJSON(r.contentType) }
        }
        return nil
    }

    func allows(host: String) -> Bool {
        let name = Self.bare(Self.withoutPort(host))
        if allowedHosts.contains(name) { return true }
        // The whole 127.0.0.0/8 block is this machine.
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// `Origin` is scheme://host[:port]; the server's own origin has the request's Host as its authority.
    static func isSameOrigin(_ origin: String, host: String) -> Bool {
        let lower = origin.lowercased()
        for scheme in ["http://", "https://"] where lower.hasPrefix(scheme) {
            return lower.dropFirst(scheme.count) == host.lowercased()[...]
        }
        return false  // "null" (a sandboxed frame, a file: page) and anything else
    }

    static func isJSON(_ contentType: String?) -> Bool {
        guard let type = contentType?.split(separator: ";").first else { return false }
        return type.trimmingCharacters(in: .whitespaces).lowercased() == "application/json"
    }

    /// `host:port`, `[v6]:port`, `[v6]` or a bare name: the name or address alone.
    static func withoutPort(_ authority: String) -> String {
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return authority }
            return String(authority[authority.index(after: authority.startIndex)..<close])
        }
        if authority.filter({ $0 == ":" }).count == 1, let colon = authority.lastIndex(of: ":") {
            return String(authority[..<colon])
        }
        return authority
    }

    static func bare(_ host: String) -> String {
        var h = host.lowercased()
        if h.hasPrefix("["), h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        if h.hasSuffix(".") { h.removeLast() }  // "localhost." is localhost
        return h
    }
}

extension HostPolicy {
    /// A `--public-host` value: a DNS name or an address as it appears in `Host`, nothing more.
    static func isValidName(_ name: String) -> Bool {
        let bare = bare(name)
        guard !bare.isEmpty, bare.utf8.count <= 253 else { return false }
        return bare.unicodeScalars.allSatisfy { s in
            (s >= "a" && s <= "z") || (s >= "0" && s <= "9") || s == "." || s == "-" || s == ":"
        }
    }
}
