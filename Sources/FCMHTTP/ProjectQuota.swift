import DeliveryCore
import CCSEngine
import Locking

/// HTTP v1's per-project quota (`serve --project-message-rate`; FCM: 600,000 messages a minute per
/// project, answered 429 RESOURCE_EXHAUSTED / QUOTA_EXCEEDED until it refills). Metered by sender,
/// the emulator's project (docs/semantics.md, "Rate limits").
final class ProjectQuota: Sendable {
    private let limiter: Locked<RateLimiter>

    init(rate: MessageRate) { limiter = Locked(RateLimiter(rate: rate)) }

    /// Counts one message of `sender`'s: nil when it fits, else the milliseconds until one would.
    func admit(sender: String, now: Int64) -> Int64? {
        limiter.withLock { $0.admit(sender, now: now) }
    }
}
