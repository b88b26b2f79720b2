import Locking
import PushDomain

/// VAPID tokens whose signature already verified, so that an application server reusing its token
/// (libraries sign one for hours, RFC 8292 §2 allows 24) is not ECDSA-checked on every push. Only a
/// token that verified enters, keyed by the token and the key it was sent with; `aud` and `exp` are
/// still judged on every request, on the emulator's clock. Bounded: emptied when full.
public final class VAPIDTokenCache: Sendable {
    static let capacity = 4096

    struct Entry: Sendable {
        var claims: [String: JSONValue]
        var publicKey: [UInt8]
    }

    private let entries = Locked<[String: Entry]>([:])

    public init() {}

    func entry(token: String, key: String) -> Entry? {
        entries.withLock { $0[token + " " + key] }
    }

    func remember(_ entry: Entry, token: String, key: String) {
        entries.withLock {
            if $0.count >= Self.capacity { $0.removeAll(keepingCapacity: true) }
            $0[token + " " + key] = entry
        }
    }
}
