import DeliveryCore
import PushDomain
import StoreModel

/// A device group as the admin API and the management API show it.
public struct DeviceGroupView: Sendable, Equatable {
    public var senderID: String
    public var name: String
    /// A fresh encoding of the group's key (every encoding is valid).
    public var notificationKey: String
    public var members: [String]
    public var createdAt: Int64
}

/// Device groups (seed 004): management on behalf of a sender, sends to a group, and the lookups
/// the front ends and the admin API need. The rules themselves live in `DeviceGroupRegistry`.
extension Engine {
    /// Creates a group or changes its members; returns the notification key to answer with (a new
    /// encoding for `create`, the caller's own key for `add` and `remove`). Durable before it returns.
    public func manageDeviceGroup(sender: String, _ operation: DeviceGroupOperation) async throws(DeviceGroupError) -> String {
        let now = clock.nowMillis()
        // Drawn once: the change is made in every shard, which must all name a new group alike.
        let newID = NotificationKey.newGroupID()
        let change: DeviceGroupChange = try await change(storeFailure: { DeviceGroupError.storeFailure($0) }) { s in
            let decided = s.groups.plan(operation, sender: sender, now: now, newID: { newID }) { token in
                guard let d = s.registry.installation(token) else { return false }
                return d.status == .active && d.senders.contains(sender)
            }
            switch decided {
            case .failure(let error):
                return .failure(error)
            case .success(let change):
                let id: String, op: StoreOp
                switch change {
                case .save(let g): (id, op) = (g.id, .upsertDeviceGroup(g))
                case .delete(let g): (id, op) = (g.id, .removeDeviceGroup(id: g.id))
                }
                let before = s.groups.byID[id]
                s.groups.apply(change)
                return .success(Change(value: change, ops: [op], undo: { s in s.groups.restore(before, id: id) }))
            }
        }
        switch (operation, change) {
        case (.create, .save(let g)): return NotificationKey.make(groupID: g.id)
        case (.add(let key, _, _), _), (.remove(let key, _, _), _): return key
        case (.create, .delete(let g)): return NotificationKey.make(groupID: g.id) // not reached: create never deletes
        }
    }

    /// `GET /fcm/notification?notification_key_name=`: a fresh encoding of the key of the sender's
    /// group with that name.
    public func deviceGroupKey(sender: String, name: String) -> String? {
        state.withLock { $0.groups.group(name: name, sender: sender) }.map { NotificationKey.make(groupID: $0.id) }
    }

    /// The sender that owns the group a key encodes (legacy HTTP picks the sender this way when the
    /// request names none).
    public func deviceGroupOwner(key: String) -> String? {
        state.withLock { $0.groups.group(key: key)?.senderID }
    }

    /// Whether `to` is a notification key of one of this sender's groups.
    public func isDeviceGroupKey(_ to: String, sender: String) -> Bool {
        state.withLock { $0.groups.group(key: to, sender: sender) != nil }
    }

    public func deviceGroups(sender: String) -> [DeviceGroupView] {
        state.withLock { $0.groups.groups(sender: sender) }.map(Self.view)
    }

    /// The groups a token is a member of, of any sender.
    public func deviceGroups(token: String) -> [DeviceGroupView] {
        state.withLock { $0.groups.groups(token: token) }.map(Self.view)
    }

    static func view(_ g: DeviceGroupRecord) -> DeviceGroupView {
        DeviceGroupView(senderID: g.senderID, name: g.name, notificationKey: NotificationKey.make(groupID: g.id),
                        members: g.members, createdAt: g.createdAt)
    }

    // MARK: sends

    /// A message to a group: each member gets it through the one-token path (its own TTL, collapse,
    /// priority, Doze, limits and receipt), and the answer counts the results. Members found dead
    /// (uninstalled, unknown) are then pruned from the group, as FCM did: the send that finds them
    /// reports them, later ones do not count them.
    func sendToGroup(_ message: Message, key: String, senderID: String, completion: @escaping @Sendable ([SendResult]) -> Void) {
        guard let group = state.withLock({ $0.groups.group(key: key, sender: senderID) }) else {
            completion([.refused(.groupNotFound(key: key))])
            return
        }
        let members = group.members
        let gathered = ResultsInOrder(count: members.count) { [self] results in
            var success = 0
            var failed: [(token: String, error: SendError)] = []
            var dead = Set<String>()
            for (token, result) in zip(members, results) {
                switch result {
                case .accepted: success += 1
                case .refused(let error):
                    failed.append((token, error))
                    switch error {
                    case .unregistered, .invalidRegistration: dead.insert(token)
                    default: break
                    }
                case .group, .fannedOut: failed.append((token, .unavailable)) // not reached: a member is a token
                }
            }
            if !dead.isEmpty && !message.dryRun { prune(dead, fromGroup: group.id) }
            completion([.group(GroupSendOutcome(notificationKey: key, success: success, failed: failed))])
        }
        for (index, token) in members.enumerated() {
            send(message, to: token, senderID: senderID) { gathered.set(index, $0) }
        }
    }

    /// Drops dead members. Not awaited: the send's answer already names them; memory and the write's
    /// submission share the critical section, so the disk sees group changes in memory's order.
    private func prune(_ dead: Set<String>, fromGroup id: String) {
        withEveryShard { held in
            guard let pruned = held[0].pointee.groups.pruning(dead, fromGroup: id) else { return }
            for pointer in held { pointer.pointee.groups.apply(.save(pruned)) }
            committer.submit(.upsertDeviceGroup(pruned)) { [logger] error in
                // Memory keeps the pruning: the members are dead either way, and the next send to
                // the group after a restart prunes them again.
                if let error { logger.error("pruning a device group could not be stored", metadata: ["error": "\(error)"]) }
            }
        }
    }

    // MARK: upstream

    /// For an upstream message whose `to` is a notification key: the group's sender and name, if the
    /// device is a member (nil when `to` is no key of a group it belongs to).
    func upstreamGroup(key: String, token: String) -> (sender: String, name: String)? {
        state.withLock { s in
            guard let g = s.groups.group(key: key), g.members.contains(token) else { return nil }
            return (g.senderID, g.name)
        }
    }
}
