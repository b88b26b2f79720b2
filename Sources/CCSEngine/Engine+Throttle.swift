import DeliveryCore
import StoreModel

/// FCM's throttling of collapsible messages (`serve --collapsible-throttle`): the core decides
/// (DeliveryCore+Throttle.swift); the tick reads again the queues whose held messages may go now.
extension Engine {
    /// Reads again the queues of connected devices whose held messages may go now.
    func releaseThrottled(now: Int64) {
        let due = eachShard { s -> [(String, any DeviceLink)] in
            s.core.throttleDue(now: now).compactMap { due in s.deviceLinks[due.connection].map { (due.token, $0) } }
        }.flatMap { $0 }
        for (token, link) in due { deliverBacklog(token: token, link: link) }
    }

    /// The device message ids the throttle holds back for `token` (the admin queue view marks them).
    public func throttledMessageIDs(token: String) -> Set<String> {
        shard(token).withLock { s in
            guard let throttle = s.throttle else { return [] }
            return Set(throttle.heldIDs(token))
        }
    }
}
