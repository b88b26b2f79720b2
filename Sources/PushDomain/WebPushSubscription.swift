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

    public init(endpoint: String, p256dh: String, auth: String) {
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
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
        return .success(WebPushSubscription(endpoint: endpoint, p256dh: p256dh, auth: auth))
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
