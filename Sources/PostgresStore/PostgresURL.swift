import Foundation
import NIOSSL
import PostgresNIO

/// Where the PostgreSQL backend connects: a libpq-style URL,
/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|require]`, or with
/// `?host=/run/postgresql` a Unix socket directory (as libpq spells it). Defaults as libpq's:
/// port 5432, database = user.
public struct PostgresURL: Sendable, Equatable, CustomStringConvertible {
    public enum Endpoint: Sendable, Equatable {
        case tcp(host: String, port: Int)
        case unixSocket(path: String)
    }

    public enum TLSMode: String, Sendable, Equatable {
        /// Plain TCP (loopback, a private network).
        case disable
        /// TLS, the server's certificate verified against the system's roots.
        case require
    }

    public var endpoint: Endpoint
    public var user: String
    public var password: String?
    public var database: String
    public var tls: TLSMode

    public struct Invalid: Error, CustomStringConvertible {
        public var description: String
    }

    public init(parsing text: String) throws {
        func invalid(_ why: String) -> Invalid {
            Invalid(description: "--store \(Self.redacted(text)): \(why); expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE")
        }
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased() else {
            throw invalid("not a URL")
        }
        guard scheme == "postgres" || scheme == "postgresql" else { throw invalid("the scheme is not postgres://") }
        let query = Dictionary((url.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        guard let user = url.user?.removingPercentEncoding ?? query["user"], !user.isEmpty else {
            throw invalid("no user name")
        }
        self.user = user
        password = url.password?.removingPercentEncoding ?? query["password"]
        let path = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path
        database = path.isEmpty ? user : (path.removingPercentEncoding ?? path)
        switch query["sslmode"] ?? "disable" {
        case "disable", "allow", "prefer": tls = .disable
        case "require", "verify-ca", "verify-full": tls = .require
        case let other: throw invalid("sslmode \(other) is not one of disable, require")
        }
        if let socket = query["host"], socket.hasPrefix("/") {
            endpoint = .unixSocket(path: socket + "/.s.PGSQL.\(url.port ?? 5432)")
        } else {
            guard let host = url.host, !host.isEmpty else { throw invalid("no host") }
            let port = url.port ?? 5432
            guard (1...65535).contains(port) else { throw invalid("port \(port) is not 1-65535") }
            endpoint = .tcp(host: host, port: port)
        }
    }

    /// The URL without its password, for logs and errors.
    public var description: String {
        let host: String
        switch endpoint {
        case .tcp(let h, let p): host = "\(h):\(p)"
        case .unixSocket(let path): host = "[\(path)]"
        }
        return "postgres://\(user)\(password == nil ? "" : ":***")@\(host)/\(database)"
    }

    /// The URL as text, password included (for a child process or a test; never for a log).
    public var urlString: String {
        var c = URLComponents()
        c.scheme = "postgres"
        c.user = user
        c.password = password
        c.path = "/" + database
        switch endpoint {
        case .tcp(let host, let port):
            c.host = host
            c.port = port
        case .unixSocket(let path):
            c.host = "localhost"
            let directory = String(path[..<(path.range(of: "/.s.PGSQL.", options: .backwards)?.lowerBound ?? path.endIndex)])
            c.port = Int(path.split(separator: ".").last ?? "") ?? 5432
            c.queryItems = [URLQueryItem(name: "host", value: directory)]
        }
        if tls == .require { c.queryItems = (c.queryItems ?? []) + [URLQueryItem(name: "sslmode", value: "require")] }
        return c.string ?? description
    }

    static func redacted(_ text: String) -> String {
        guard var url = URLComponents(string: text), url.password != nil else { return text }
        url.password = "***"
        return url.string ?? text
    }

    func configuration() throws -> PostgresConnection.Configuration {
        switch endpoint {
        case .tcp(let host, let port):
            let tls: PostgresConnection.Configuration.TLS
            switch self.tls {
            case .disable: tls = .disable
            case .require: tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
            return .init(host: host, port: port, username: user, password: password, database: database, tls: tls)
        case .unixSocket(let path):
            return .init(unixSocketPath: path, username: user, password: password, database: database)
        }
    }
}
