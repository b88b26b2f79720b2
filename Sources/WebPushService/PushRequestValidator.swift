import Foundation
import PushDomain

/// A push message request (RFC 8030 §5) as the endpoint received it: the headers that matter and
/// the body (at most `PushRequestValidator.maximumPayloadBytes`, the host's read limit).
public struct PushRequest: Sendable {
    public var ttl: String?
    public var urgency: String?
    public var topic: String?
    public var contentEncoding: String?
    public var encryption: String?
    public var cryptoKey: String?
    public var authorization: String?
    public var body: [UInt8]

    public init(ttl: String? = nil, urgency: String? = nil, topic: String? = nil, contentEncoding: String? = nil,
                encryption: String? = nil, cryptoKey: String? = nil, authorization: String? = nil, body: [UInt8] = []) {
        self.ttl = ttl
        self.urgency = urgency
        self.topic = topic
        self.contentEncoding = contentEncoding
        self.encryption = encryption
        self.cryptoKey = cryptoKey
        self.authorization = authorization
        self.body = body
    }
}

/// The subscription a request's path names, as the push service knows it.
public enum SubscriptionStanding: Sendable {
    case unknown
    /// Unsubscribed or expired: RFC 8030 §7.3's 410 Gone.
    case gone
    case active(WebPushSubscription)
}

/// RFC 8030 §5.3: how soon the user agent needs the message.
public enum PushUrgency: String, Sendable, CaseIterable {
    case veryLow = "very-low"
    case low
    case normal
    case high
}

/// A message the push service takes: still encrypted as it came (the device decrypts it), plus
/// what the service itself read of it.
public struct AcceptedPushMessage: Sendable, Equatable {
    /// Seconds the service keeps it for an offline device, capped at FCM's four weeks.
    public var ttl: Int
    /// The TTL header was over the cap (the answer's `TTL` header then says what was kept).
    public var ttlCapped: Bool
    public var urgency: PushUrgency
    public var topic: String?
    /// nil: a push without payload (the `push` event's data is null).
    public var encoding: PushContentEncoding?
    public var body: [UInt8]
    public var encryption: String?
    public var cryptoKey: String?
    /// The decrypted payload (the service checks that it decrypts; the journal does not keep it).
    public var plaintext: [UInt8]
    public var applicationServer: VAPIDVerifier.Identity
}

/// Why a request is refused: the HTTP status RFC 8030/8292 (or FCM) answers, and the reason in words.
public struct PushRefusal: Error, Sendable, Equatable {
    public enum Status: Int, Sendable {
        case badRequest = 400
        case unauthorized = 401
        case forbidden = 403
        case notFound = 404
        case gone = 410
        case payloadTooLarge = 413
        case unsupportedMediaType = 415
        case tooManyRequests = 429
        case serviceUnavailable = 503
    }

    public var status: Status
    public var reason: String

    public init(_ status: Status, _ reason: String) {
        self.status = status
        self.reason = reason
    }
}

/// The push service's checks on one request, in the order FCM answers them: the subscription, the
/// application server's identity, the RFC 8030 headers, the size, then the encryption.
public enum PushRequestValidator {
    /// RFC 8030 §7.2 lets a service refuse more than 4096 bytes of payload; FCM does.
    public static let maximumPayloadBytes = 4096

    /// `audience`: the origin of the subscription's endpoint, which a VAPID token must name.
    public static func validate(_ request: PushRequest, subscription standing: SubscriptionStanding,
                                audience: String, nowSeconds: Int64,
                                verifiedTokens: VAPIDTokenCache? = nil) -> Result<AcceptedPushMessage, PushRefusal> {
        let subscription: WebPushSubscription
        switch standing {
        case .unknown: return .failure(PushRefusal(.notFound, "no such push subscription"))
        case .gone: return .failure(PushRefusal(.gone, "push subscription has unsubscribed or expired"))
        case .active(let s): subscription = s
        }
        let identity: VAPIDVerifier.Identity
        switch VAPIDVerifier.verify(authorization: request.authorization, cryptoKey: request.cryptoKey,
                                    audience: audience, nowSeconds: nowSeconds, cache: verifiedTokens) {
        case .failure(let refusal): return .failure(PushRefusal(.unauthorized, refusal.reason))
        case .success(let found): identity = found
        }
        // RFC 8292 §4.2: a subscription restricted to one application server key takes no other.
        if let required = subscription.serviceKeys?.applicationServerKey,
           Base64URL.decode(required) != identity.publicKey {
            return .failure(PushRefusal(.forbidden, "the VAPID key is not the applicationServerKey this subscription was made with"))
        }
        let headers: (ttl: Int, capped: Bool, urgency: PushUrgency, topic: String?)
        switch readHeaders(request) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let read): headers = read
        }
        guard request.body.count <= maximumPayloadBytes else {
            return .failure(PushRefusal(.payloadTooLarge, "the payload is \(request.body.count) bytes; at most \(maximumPayloadBytes)"))
        }
        var accepted = AcceptedPushMessage(ttl: headers.ttl, ttlCapped: headers.capped, urgency: headers.urgency,
                                           topic: headers.topic, encoding: nil, body: request.body,
                                           encryption: request.encryption, cryptoKey: request.cryptoKey,
                                           plaintext: [], applicationServer: identity)
        if request.body.isEmpty { return .success(accepted) }
        switch decrypt(request, subscription: subscription) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let (encoding, plaintext)):
            accepted.encoding = encoding
            accepted.plaintext = plaintext
            return .success(accepted)
        }
    }

    /// TTL (required, RFC 8030 §5.2), Urgency (§5.3), Topic (§5.4).
    static func readHeaders(_ request: PushRequest) -> Result<(Int, Bool, PushUrgency, String?), PushRefusal> {
        guard let ttlText = request.ttl?.trimmingCharacters(in: .whitespaces) else {
            return .failure(PushRefusal(.badRequest, "the TTL header is required (RFC 8030 §5.2)"))
        }
        guard !ttlText.isEmpty, ttlText.utf8.count <= 20, ttlText.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            return .failure(PushRefusal(.badRequest, "the TTL header must be a non-negative number of seconds"))
        }
        // Digits only: too many for an Int is over the cap anyway.
        let asked = Int(ttlText) ?? Int.max
        let ttl = min(asked, Message.maximumTimeToLive)
        var urgency = PushUrgency.normal
        if let text = request.urgency?.trimmingCharacters(in: .whitespaces).lowercased() {
            guard let u = PushUrgency(rawValue: text) else {
                return .failure(PushRefusal(.badRequest, "the Urgency header must be very-low, low, normal or high (RFC 8030 §5.3)"))
            }
            urgency = u
        }
        var topic: String?
        if let text = request.topic {
            guard (1...32).contains(text.utf8.count), text.utf8.allSatisfy(isBase64URL) else {
                return .failure(PushRefusal(.badRequest, "the Topic header must be 1 to 32 base64url characters (RFC 8030 §5.4)"))
            }
            topic = text
        }
        return .success((ttl, asked > ttl, urgency, topic))
    }

    static func isBase64URL(_ c: UInt8) -> Bool {
        (0x30...0x39).contains(c) || (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c) || c == 0x2D || c == 0x5F
    }

    static func decrypt(_ request: PushRequest, subscription: WebPushSubscription)
        -> Result<(PushContentEncoding, [UInt8]), PushRefusal> {
        guard let text = request.contentEncoding?.trimmingCharacters(in: .whitespaces).lowercased(), !text.isEmpty else {
            return .failure(PushRefusal(.badRequest, "a payload needs Content-Encoding: aes128gcm (RFC 8291) or aesgcm"))
        }
        guard let encoding = PushContentEncoding(rawValue: text) else {
            return .failure(PushRefusal(.unsupportedMediaType, "the Content-Encoding \(text.prefix(40)) is not aes128gcm or aesgcm"))
        }
        guard let keys = SubscriptionPrivateKeys(subscription) else {
            return .failure(PushRefusal(.notFound, "no such push subscription"))
        }
        do {
            let plaintext = try PushMessageDecryptor.decrypt(request.body, encoding: encoding, keys: keys,
                                                             encryptionHeader: request.encryption, cryptoKeyHeader: request.cryptoKey)
            return .success((encoding, plaintext))
        } catch {
            return .failure(PushRefusal(.badRequest, error.description))
        }
    }
}
