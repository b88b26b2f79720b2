import PushDomain

/// How a Web Push message travels from the endpoint through the engine to the simulated browser:
/// as the data of a device message, still encrypted as the application server sent it (the push
/// service does not hand the plaintext on; the browser decrypts with its own key).
public struct PushedMessage: Sendable, Equatable {
    /// The data keys; `webpush_` so that no FCM data message can be taken for one by accident.
    static let bodyKey = "webpush_body"
    static let encodingKey = "webpush_encoding"
    static let encryptionKey = "webpush_encryption"
    static let cryptoKeyKey = "webpush_crypto_key"

    public var encoding: PushContentEncoding?
    public var body: [UInt8]
    public var encryption: String?
    public var cryptoKey: String?

    public init(encoding: PushContentEncoding?, body: [UInt8], encryption: String? = nil, cryptoKey: String? = nil) {
        self.encoding = encoding
        self.body = body
        self.encryption = encryption
        self.cryptoKey = cryptoKey
    }

    public init(_ accepted: AcceptedPushMessage) {
        self.init(encoding: accepted.encoding, body: accepted.body,
                  encryption: accepted.encoding == .aesgcm ? accepted.encryption : nil,
                  cryptoKey: accepted.encoding == .aesgcm ? accepted.cryptoKey : nil)
    }

    public var data: [String: String] {
        var d = [Self.bodyKey: Base64URL.encode(body)]
        if let encoding { d[Self.encodingKey] = encoding.rawValue }
        if let encryption { d[Self.encryptionKey] = encryption }
        if let cryptoKey { d[Self.cryptoKeyKey] = cryptoKey }
        return d
    }

    /// From a delivered message's `data` object; nil when it is not a Web Push message. (A body is at
    /// most 4096 bytes, all that `Base64URL.decode` takes.)
    public init?(data: JSONValue?) {
        guard case .object(let d)? = data, let bodyText = d[Self.bodyKey]?.stringValue,
              let body = Base64URL.decode(bodyText) else { return nil }
        let encoding = d[Self.encodingKey]?.stringValue.flatMap(PushContentEncoding.init(rawValue:))
        if !body.isEmpty && encoding == nil { return nil }
        self.init(encoding: encoding, body: body, encryption: d[Self.encryptionKey]?.stringValue,
                  cryptoKey: d[Self.cryptoKeyKey]?.stringValue)
    }

    /// The browser's side: the payload decrypted with the subscription's keys (empty: no payload).
    public func decrypt(with keys: SubscriptionPrivateKeys) throws(PushMessageDecryptor.Failure) -> [UInt8] {
        guard let encoding else { return [] }
        return try PushMessageDecryptor.decrypt(body, encoding: encoding, keys: keys, encryptionHeader: encryption,
                                                cryptoKeyHeader: cryptoKey)
    }
}
