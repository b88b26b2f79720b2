import PushDomain
import StoreModel

/// An app uninstalled (or re-installed, which uninstalls the old installation and registers a new
/// one) in the core: the installation is marked, goes offline, loses its topics; what the store must
/// write comes back with it, and so does how to take it back if that write fails.
extension DeliveryCore {
    /// What an uninstall changed, to take it back (`undo`) when its commit fails.
    package struct Uninstall: Sendable {
        package let before: DeviceRecord
        package let after: DeviceRecord
        package let fresh: DeviceRecord?
        package let topics: [TopicRegistry.Topic: Int64]
        /// The writes that make it durable, in this order.
        package let ops: [StoreOp]
        /// The connection to close (`DeviceEffect.release`), when the device was online.
        package let effects: [DeviceEffect]
    }

    /// Marks the installation removed, takes it offline at once (nothing more is handed to it) and out
    /// of its topics; with `fresh`, the re-installed app's registration takes its place (and wins its
    /// APNs token, whose feedback tuples go).
    package mutating func uninstall(_ before: DeviceRecord, replacedBy fresh: DeviceRecord? = nil) -> Uninstall {
        let token = before.token
        var device = before
        device.status = .uninstalled
        if let fresh { device.replacedBy = fresh.token }
        registry.update(device)
        let effects = dropDevice(token)
        let topics = self.topics.removeAll(token: token)
        var ops: [StoreOp] = [.upsertDevice(device), .removeAllMessages(token: token), .clearTray(token: token)]
        if !topics.isEmpty { ops.append(.removeSubscriptions(token: token)) }
        if let fresh {
            registry.add(fresh)
            ops.append(.upsertDevice(fresh))
            if let apns = fresh.apnsToken { ops.append(.removeAPNsFeedbackToken(bundleID: fresh.app, deviceToken: apns)) }
        }
        return Uninstall(before: before, after: device, fresh: fresh, topics: topics, ops: ops, effects: effects)
    }

    /// Takes an uninstall back (its commit failed), as far as nothing changed the installation since.
    /// The connection it closed stays closed: the device connects again.
    package mutating func undo(_ u: Uninstall) {
        var freshRemoved = false
        if let fresh = u.fresh, registry.devices[fresh.token] == fresh {
            registry.remove(fresh.token)
            freshRemoved = true
        }
        guard registry.devices[u.before.token] == u.after else { return }
        // Adding it again gives the APNs token back to the old registration.
        if freshRemoved { registry.add(u.before) } else { registry.update(u.before) }
        for (topic, at) in u.topics { _ = topics.add(topic, token: u.before.token, at: at) }
    }
}
