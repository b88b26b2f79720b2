import PushDomain
import StoreModel

/// The admin API's resets and a token's refresh in the core: what each changes, what it writes, the
/// connections to close, and how to take it back if its commit fails.
extension DeliveryCore {
    /// What a sender's reset did.
    package struct SenderReset: Sendable {
        /// Installations removed (those registered for this sender alone).
        package let removed: Int
        package let ops: [StoreOp]
        /// Their connections, to close.
        package let effects: [DeviceEffect]
    }

    /// Forgets one sender's data: devices registered for it alone (offline at once, out of their
    /// topics), the sender from devices shared with others, its topics and groups. The host takes it
    /// back by restoring the whole state it held before.
    package mutating func resetSender(_ sender: String) -> SenderReset {
        var ops: [StoreOp] = [.removeSenderData(senderID: sender)]
        var effects: [DeviceEffect] = []
        var removed = 0
        for (token, device) in registry.devices where device.senders.contains(sender) {
            if device.senders == [sender] {
                removed += 1
                registry.remove(token)
                effects += dropDevice(token)
                _ = topics.removeAll(token: token)
            } else {
                var shared = device
                shared.senders.removeAll { $0 == sender }
                registry.update(shared)
                ops.append(.upsertDevice(shared))
            }
        }
        for (topic, tokens) in topics.subscribers where topic.senderID == sender {
            for token in tokens { _ = topics.remove(topic, token: token) }
        }
        groups.removeAll(sender: sender)
        return SenderReset(removed: removed, ops: ops, effects: effects)
    }

    /// What a reset of every device did, to take it back (`undo`).
    package struct DevicesReset: Sendable {
        package let count: Int
        package let effects: [DeviceEffect]
        let registry: Registry
        let topics: TopicRegistry
        let groups: DeviceGroupRegistry
        package var ops: [StoreOp] { [.removeAllDevices] }
    }

    /// Forgets every device, its topics and groups; every device connection closes. Senders stay.
    package mutating func resetDevices() -> DevicesReset {
        let reset = DevicesReset(count: registry.devices.count, effects: dropAllDevices(), registry: registry,
                                 topics: topics, groups: groups)
        registry.removeAllDevices()
        groups.removeAll()
        topics = TopicRegistry()
        return reset
    }

    /// Takes a reset of every device back, unless a device was registered since (then the newer
    /// state stands); senders provisioned since stay.
    package mutating func undo(_ reset: DevicesReset) {
        guard registry.devices.isEmpty else { return }
        registry.restoreDevices(from: reset.registry)
        topics = reset.topics
        groups = reset.groups
    }

    /// Why a token refresh is refused.
    package enum RefreshRefusal: Error, Equatable {
        case unknown
        case uninstalled
        case tooMany(limit: Int)
    }

    /// What a token refresh did: the installation with its new token last.
    package struct Refresh: Sendable, Equatable {
        package let before: DeviceRecord
        package let after: DeviceRecord
        package var ops: [StoreOp] { [.upsertDevice(after)] }
    }

    /// The installation `token` names gets `fresh` as its newest token; its earlier ones stay valid.
    package mutating func refresh(_ token: String, to fresh: String, limit: Int) -> Result<Refresh, RefreshRefusal> {
        guard let before = registry.installation(token) else { return .failure(.unknown) }
        guard before.status == .active else { return .failure(.uninstalled) }
        guard before.refreshedTokens.count < limit else { return .failure(.tooMany(limit: limit)) }
        var after = before
        after.refreshedTokens.append(fresh)
        registry.update(after)
        return .success(Refresh(before: before, after: after))
    }

    /// Takes a refresh back, as far as nothing changed the installation since.
    package mutating func undo(_ r: Refresh) {
        guard registry.devices[r.before.token] == r.after else { return }
        registry.update(r.before)
    }
}
