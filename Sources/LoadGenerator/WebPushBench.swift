import NIOCore
import PushDomain
import WebPushService

/// `bench web-push`: what the generator's application servers send (RFC 8030 requests, each payload
/// encrypted to its subscription and the VAPID token signed once per run), and how its simulated
/// browsers read the send stamp back out of a decrypted payload.
public final class WebPushPlan: Sendable {
    /// One per recipient, in the order of the run's `Recipients`.
    let subscriptions: [WebPushSubscription]
    /// `vapid t=…, k=…` for the endpoints' origin (one origin: one token for the whole run).
    let authorization: String
    let host: String

    public init(subscriptions: [WebPushSubscription], authorization: String, host: String) {
        self.subscriptions = subscriptions
        self.authorization = authorization
        self.host = host
    }
}

enum WebPushBench {
    /// `POST /fcm/send/<token>` with `{"bt":"STAMP","p":"PAYLOAD"}` encrypted (aes128gcm) to the
    /// recipient's subscription; nil if it cannot be encrypted (a payload over the limit).
    static func request(_ plan: WebPushPlan, recipient: Int, token: [UInt8], stamp: UInt64, payload: [UInt8]) -> [UInt8]? {
        var text: [UInt8] = Array(#"{"bt":""#.utf8)
        text += Array(String(stamp).utf8)
        text += Array(#"","p":""#.utf8)
        text += payload
        text += Array(#""}"#.utf8)
        guard let body = try? WebPushEncryption.encrypt(text, to: plan.subscriptions[recipient]) else { return nil }
        var head = "POST /fcm/send/" + String(decoding: token, as: UTF8.self) + " HTTP/1.1\r\nHost: \(plan.host)\r\n"
        head += "TTL: 600\r\nContent-Encoding: aes128gcm\r\nContent-Type: application/octet-stream\r\n"
        head += "Authorization: \(plan.authorization)\r\nContent-Length: \(body.count)\r\n\r\n"
        return Array(head.utf8) + body
    }

    /// The send stamp in a delivered stanza's Web Push payload, decrypted with the browser's keys.
    static func stamp(in s: UnsafeRawBufferPointer, keys: SubscriptionPrivateKeys) -> UInt64? {
        guard let range = ByteScan.jsonString("\"webpush_body\":\"", in: s),
              let body = Base64URL.decode(String(decoding: UnsafeRawBufferPointer(rebasing: s[range]), as: UTF8.self)),
              let plaintext = try? PushMessageDecryptor.decrypt(body, encoding: .aes128gcm, keys: keys) else { return nil }
        return plaintext.withUnsafeBytes { p in
            ByteScan.jsonString("\"bt\":\"", in: p).flatMap { ByteScan.decimal(p, $0) }
        }
    }
}
