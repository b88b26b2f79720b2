/// A browser's Push API subscription (`PushSubscription.toJSON()`): where the push service takes
/// messages for it, and the keys a sender encrypts them with (RFC 8291). The JS SDK registers it with
/// FCM together with the web app's id; the emulator keeps it as the web device's identity and
/// delivers over the device channel instead of encrypting to the endpoint.
public struct WebPushSubscription: Sendable, Equatable {
    public var endpoint: String
    /// The browser's P-256 public key: 65 bytes (an uncompressed point), base64url.
    public var p256dh: String
    /// The authentication secret: 16 bytes, base64url.
    public var auth: String
    /// Set when the emulator itself is the push service of this subscription (`POST
    /// /emulator/v1/web-push/subscriptions`, `device --push-service emulator`): it then holds the
    /// browser's private key, to check and (for the simulated browser) decrypt what is pushed.
    public var serviceKeys: ServiceKeys?

    /// What the emulator keeps of a subscription it serves, beyond `toJSON()`.
    public struct ServiceKeys: Sendable, Equatable {
        /// The browser's P-256 private key: 32 bytes, base64url.
        public var privateKey: String
        /// The `applicationServerKey` the subscription was made with (65 bytes, base64url); nil: any
        /// VAPID key is taken.
        public var applicationServerKey: String?

        public init(privateKey: String, applicationServerKey: String?) {
            self.privateKey = privateKey
            self.applicationServerKey = applicationServerKey
        }
    }

    public init(endpoint: String, p256dh: String, auth: String, serviceKeys: ServiceKeys? = nil) {
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
        self.serviceKeys = serviceKeys
    }

    /// The emulator is the push service: FCM's endpoint (Chrome's) or one it made itself. Nothing is
    /// sent out for these; the device channel delivers.
    public var isServedByEmulator: Bool { isOnFCMPushService || serviceKeys != nil }

    /// The endpoint's origin (`scheme://host[:port]`), which a VAPID token's `aud` names.
    public var endpointOrigin: String {
        let bytes = Array(endpoint.utf8)
        var start = 0
        // After "scheme://": the first "/" after the authority starts the path.
        if let colon = bytes.firstIndex(of: 0x3A), colon + 2 < bytes.count, bytes[colon + 1] == 0x2F, bytes[colon + 2] == 0x2F {
            start = colon + 3
        }
        let pathStart = bytes[start...].firstIndex(of: 0x2F) ?? bytes.count
        return String(decoding: bytes[..<pathStart], as: UTF8.self).lowercased()
    }

    /// The endpoint is on FCM's own push service, Chrome's: there the emulator is the push service and
    /// delivers over the device channel; any other endpoint is a push service of its own (Web Push).
    public var isOnFCMPushService: Bool {
        let lower = endpoint.lowercased()
        return ["https://fcm.googleapis.com/", "https://android.googleapis.com/"].contains { lower.hasPrefix($0) }
    }

    public var json: JSONValue {
        .object(["endpoint": .string(endpoint), "keys": .object(["p256dh": .string(p256dh), "auth": .string(auth)])])
    }

    /// Exactly as the browser's `subscription.toJSON()` gives it: with `expirationTime` (null: FCM's
    /// subscriptions do not expire by a date).
    public var browserJSON: JSONValue {
        .object(["endpoint": .string(endpoint), "expirationTime": .null,
                 "keys": .object(["p256dh": .string(p256dh), "auth": .string(auth)])])
    }

    /// What the store keeps: `json` and, for a subscription the emulator serves, its keys.
    public var storedJSON: JSONValue {
        guard let serviceKeys, case .object(var fields) = json else { return json }
        var keys: [String: JSONValue] = ["private_key": .string(serviceKeys.privateKey)]
        if let k = serviceKeys.applicationServerKey { keys["application_server_key"] = .string(k) }
        fields["emulator_push_service"] = .object(keys)
        return .object(fields)
    }

    /// `{"endpoint":"https://…","keys":{"p256dh":"…","auth":"…"}}` checked as a browser makes it; the
    /// error text names the field.
    public static func parse(_ value: JSONValue) -> Result<WebPushSubscription, SubscriptionError> {
        guard case .object(let o) = value else { return .failure(.init("\"subscription\" must be an object")) }
        guard case .string(let endpoint)? = o["endpoint"] else {
            return .failure(.init("\"subscription.endpoint\" (string) is required"))
        }
        let lower = endpoint.lowercased()
        // Browsers make https endpoints; a push service of one's own on this machine may be plain http.
        let loopbackHTTP = ["http://127.0.0.1:", "http://127.0.0.1/", "http://localhost:", "http://localhost/",
                            "http://[::1]:", "http://[::1]/"].contains { lower.hasPrefix($0) }
        guard endpoint.utf8.count <= 2048, lower.hasPrefix("https://") || loopbackHTTP, endpoint.utf8.count > 8,
              !endpoint.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
            return .failure(.init("\"subscription.endpoint\" must be an https:// URL (or http:// on 127.0.0.1, localhost or [::1]) of at most 2048 characters"))
        }
        guard case .object(let keys)? = o["keys"] else {
            return .failure(.init("\"subscription.keys\" (object with p256dh and auth) is required"))
        }
        guard case .string(let p256dh)? = keys["p256dh"],
              let point = Base64URL.decode(p256dh), point.count == 65, point[0] == 0x04 else {
            return .failure(.init("\"subscription.keys.p256dh\" must be a base64url P-256 public key (65 bytes, uncompressed)"))
        }
        guard case .string(let auth)? = keys["auth"], let secret = Base64URL.decode(auth), secret.count == 16 else {
            return .failure(.init("\"subscription.keys.auth\" must be a base64url 16-byte secret"))
        }
        return .success(WebPushSubscription(endpoint: endpoint, p256dh: p256dh, auth: auth,
                                            serviceKeys: parseServiceKeys(o["emulator_push_service"])))
    }

    /// The keys `storedJSON` adds (only the store writes them; a client's are read the same way).
    static func parseServiceKeys(_ value: JSONValue?) -> ServiceKeys? {
        guard case .object(let o)? = value, case .string(let privateKey)? = o["private_key"],
              let raw = Base64URL.decode(privateKey), raw.count == 32 else { return nil }
        var serverKey: String?
        if case .string(let k)? = o["application_server_key"], let point = Base64URL.decode(k), point.count == 65 {
            serverKey = k
        }
        return ServiceKeys(privateKey: privateKey, applicationServerKey: serverKey)
    }

    public struct SubscriptionError: Error, Equatable, Sendable {
        public var reason: String
        init(_ reason: String) { self.reason = reason }
    }
}

/// base64url without padding (RFC 4648 §5), as browsers write subscription keys; padding is accepted
/// (up to 4096 bytes decoded: keys and tokens, not bodies).
public enum Base64URL {
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        var bits: UInt32 = 0
        var count = 0
        for byte in bytes {
            bits = (bits << 8) | UInt32(byte)
            count += 8
            while count >= 6 {
                count -= 6
                out.append(alphabet[Int((bits >> UInt32(count)) & 0x3F)])
            }
            bits &= (1 << UInt32(count)) - 1
        }
        if count > 0 { out.append(alphabet[Int((bits << UInt32(6 - count)) & 0x3F)]) }
        return String(decoding: out, as: UTF8.self)
    }

    public static func decode(_ text: String) -> [UInt8]? {
        var bits: UInt32 = 0
        var count = 0
        var out: [UInt8] = []
        var sawPadding = false
        for c in text.utf8 {
            let v: UInt32
            switch c {
            case 0x41...0x5A: v = UInt32(c - 0x41)
            case 0x61...0x7A: v = UInt32(c - 0x61 + 26)
            case 0x30...0x39: v = UInt32(c - 0x30 + 52)
            case 0x2D, 0x2B: v = 62
            case 0x5F, 0x2F: v = 63
            case 0x3D: sawPadding = true; continue
            default: return nil
            }
            if sawPadding { return nil }
            bits = (bits << 6) | v
            count += 6
            if count >= 8 {
                count -= 8
                out.append(UInt8((bits >> UInt32(count)) & 0xFF))
            }
            if out.count > 4096 { return nil }
        }
        return out
    }
}
