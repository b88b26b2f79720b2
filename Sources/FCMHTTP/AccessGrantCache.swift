import GoogleAuth
import Locking

/// Access tokens already verified, so that a client reusing its token (for an hour, as SDKs do)
/// is not HMAC-checked and decoded again on every request (a twentieth of a v1 send's CPU time).
/// Only tokens that passed `AccessTokenIssuer.check` enter; expiry is still judged per request on
/// the engine's clock. Bounded: emptied when full.
final class AccessGrantCache: Sendable {
    static let capacity = 4096
    private let grants = Locked<[String: AccessGrant]>([:])

    func grant(for token: String) -> AccessGrant? {
        grants.withLock { $0[token] }
    }

    func remember(_ grant: AccessGrant, for token: String) {
        grants.withLock {
            if $0.count >= Self.capacity { $0.removeAll(keepingCapacity: true) }
            $0[token] = grant
        }
    }
}
