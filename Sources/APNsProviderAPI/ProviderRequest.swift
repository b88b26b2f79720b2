import PushDomain

/// One request on a stream as the host read it: method, path, headers in the order sent (names lower
/// case, as HTTP/2 carries them), and the body.
public struct ProviderRequest: Sendable {
    public var method: String
    public var path: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(method: String, path: String, headers: [(name: String, value: String)], body: [UInt8]) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }

    /// The host the request named (`:authority`, which HTTP/1 views call `host`).
    public var authority: String? { header(":authority") ?? header("host") }

    /// The device token of `/3/device/<token>`, or the answer to a request that is not one.
    public func deviceToken() -> Result<String, ProviderReason> {
        guard method == "POST" else { return .failure(.methodNotAllowed) }
        let prefix = "/3/device/"
        guard path.hasPrefix(prefix) || path == "/3/device" else { return .failure(.badPath) }
        let token = path.dropFirst(min(path.count, prefix.count))
        guard !token.isEmpty else { return .failure(.missingDeviceToken) }
        guard token.utf8.count == 64, token.utf8.allSatisfy(Self.isHexDigit) else { return .failure(.badDeviceToken) }
        return .success(token.lowercased())
    }

    static func isHexDigit(_ c: UInt8) -> Bool { (48...57).contains(c) || (97...102).contains(c) || (65...70).contains(c) }
}

/// A notification request that passed every check of the provider API, ready for the engine.
public struct ProviderNotification: Sendable, Equatable {
    public var deviceToken: String
    public var topic: String
    public var bundleID: String
    public var pushType: PushType
    public var priority: Int
    /// UNIX seconds; 0 = now or never; nil: none given (stored as long as any message).
    public var expiration: Int64?
    public var collapseID: String?
    /// The provider's `apns-id`, or one made for it.
    public var apnsID: String
    public var payload: [UInt8]
    /// The payload parsed, only when it could not be passed on as sent (`JSONText.isEmbeddableObject`)
    /// or a rule had to read it (a background push); nil: it goes to the device byte for byte.
    public var parsedPayload: JSONValue?
}
