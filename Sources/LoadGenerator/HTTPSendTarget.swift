import NIOCore
import NIOSSL

/// Where the HTTP bench sends: the port (plain or TLS) and what each request carries.
public struct HTTPSendTarget: Sendable {
    public var api: HTTPBenchAPI
    public var port: Int
    public var tls: Bool
    /// `Authorization` value: `Bearer …` (v1), `key=…` (legacy), nil (noop).
    public var authorization: String?

    public init(api: HTTPBenchAPI, port: Int, tls: Bool, authorization: String?) {
        self.api = api
        self.port = port
        self.tls = tls
        self.authorization = authorization
    }

    func path(senderID: String) -> String {
        switch api {
        case .v1: "/v1/projects/\(senderID)/messages:send"
        case .legacy: "/fcm/send"
        case .noop: "/emulator/bench/noop"
        case .webpush: "/fcm/send/"
        }
    }
}
