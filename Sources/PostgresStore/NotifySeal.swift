import Crypto
import Foundation

/// What a node sends through PostgreSQL's NOTIFY, sealed with the cluster's key (docs/scaling.md):
/// any role that may connect to the database may NOTIFY and LISTEN on any channel, so a payload a
/// node acts on must prove it came from a node, and must not show a message to a listener.
///
/// ChaChaPoly (encrypted and authenticated) with a key that every node reads from `cluster_key`, a
/// table only the emulator's role may read, and the channel as authenticated data: a payload sealed
/// for one channel does not open on another. A sealed payload is `!` and the box in base64.
/// Not covered here: a payload recorded by a listener and sent again as is (a replay). The device's
/// node refuses offers over a minute old (`Engine.offerFreshnessMillis`); a replayed confirmation
/// finds its offer settled, and a replayed presence is out of date (docs/scaling.md).
struct NotifySeal: Sendable {
    static let marker = UInt8(ascii: "!")
    /// The longest text that, sealed, still fits PostgreSQL's payload limit (`LiveNotifier.payloadLimit`):
    /// 28 bytes of nonce and tag, then base64's 4 bytes per 3.
    static let plainLimit = 5_800

    private let key: SymmetricKey

    /// `secret`: the cluster's secret as stored; the key is its SHA-256.
    init(secret: String) {
        key = SymmetricKey(data: SHA256.hash(data: Array(secret.utf8)))
    }

    func seal(_ text: String, channel: String) -> String {
        // Sealing fails only for a nonce of the wrong size, and the nonce here is ChaChaPoly's own.
        let box = try! ChaChaPoly.seal(Array(text.utf8), using: key, authenticating: Array(channel.utf8))
        return "!" + box.combined.base64EncodedString()
    }

    /// The text, if `payload` was sealed with this key for `channel`.
    func open(_ payload: String, channel: String) -> String? {
        guard payload.utf8.first == Self.marker,
              let data = Data(base64Encoded: String(payload.dropFirst())),
              let box = try? ChaChaPoly.SealedBox(combined: data),
              let plain = try? ChaChaPoly.open(box, using: key, authenticating: Array(channel.utf8))
        else { return nil }
        return String(validating: plain, as: UTF8.self)
    }
}
