import PushDomain
import StoreModel

/// Why a device-group management request was refused. The texts are the ones the real service
/// answered where they are known (spec §6.3; client libraries match on them), the emulator's own
/// otherwise (docs/semantics.md, "Device groups").
public enum DeviceGroupError: Error, Sendable, Equatable {
    /// `create` with a name the sender already uses.
    case alreadyExists
    /// A key (or name) of no group of this sender.
    case notFound
    /// `add`/`remove` whose `notification_key_name` is not the name of the key's group.
    case nameMismatch
    /// None of the tokens can join (`create`, `add`) or is a member (`remove`).
    case noValidRegistrationIDs
    /// The group would have more than `limit` members.
    case tooManyMembers(limit: Int)
    case storeFailure(String)

    public var text: String {
        switch self {
        case .alreadyExists: return "notification_key already exists"
        case .notFound: return "notification_key not found"
        case .nameMismatch: return "notification_key_name doesn't match the group name of the notification_key"
        case .noValidRegistrationIDs: return "no valid registration ids"
        case .tooManyMembers(let limit): return "notification_key has reached the maximum number of members (\(limit))"
        case .storeFailure(let reason): return "could not store the change: \(reason)"
        }
    }
}

/// A management request, after the front end has checked its fields.
public enum DeviceGroupOperation: Sendable, Equatable {
    case create(name: String, tokens: [String])
    /// `name`: when given, it must be the group's (a guard against a wrong key).
    case add(key: String, name: String?, tokens: [String])
    case remove(key: String, name: String?, tokens: [String])
}

/// What a management request decides.
package enum DeviceGroupChange: Sendable, Equatable {
    /// The group is created or its members change.
    case save(DeviceGroupRecord)
    /// Its last member was removed: the group is gone, its keys are no longer found.
    case delete(DeviceGroupRecord)
}

/// Every sender's device groups, by id, by (sender, name) and by member token. A value: the engine
/// keeps it in its state and changes it only with what `plan` decided.
package struct DeviceGroupRegistry: Sendable {
    /// Seed 004: "The maximum number of members allowed for a notification key is 20."
    package static let maximumMembers = 20

    private struct NameKey: Hashable {
        package var sender: String
        package var name: String
    }

    package private(set) var byID: [String: DeviceGroupRecord] = [:]
    private var idByName: [NameKey: String] = [:]
    private var idsByToken: [String: Set<String>] = [:]

    package init(_ records: [DeviceGroupRecord] = []) {
        for r in records { insert(r) }
    }

    /// The sender's group a key encodes; nil for a string that is no key, a deleted group, or
    /// another sender's group (which this sender must not be able to tell from a deleted one).
    package func group(key: String, sender: String) -> DeviceGroupRecord? {
        guard let g = group(key: key), g.senderID == sender else { return nil }
        return g
    }

    /// The group a key encodes, whoever owns it.
    package func group(key: String) -> DeviceGroupRecord? {
        NotificationKey.groupID(of: key).flatMap { byID[$0] }
    }

    package func group(name: String, sender: String) -> DeviceGroupRecord? {
        idByName[NameKey(sender: sender, name: name)].flatMap { byID[$0] }
    }

    package func groups(sender: String) -> [DeviceGroupRecord] {
        byID.values.filter { $0.senderID == sender }.sorted { ($0.createdAt, $0.name) < ($1.createdAt, $1.name) }
    }

    package func groups(token: String) -> [DeviceGroupRecord] {
        (idsByToken[token] ?? []).compactMap { byID[$0] }.sorted { ($0.senderID, $0.name) < ($1.senderID, $1.name) }
    }

    /// Decides a management request of `sender`; changes nothing. `canJoin` says whether a token may
    /// become a member (registered, installed, for this sender); `newID` gives a fresh group id.
    package func plan(_ operation: DeviceGroupOperation, sender: String, now: Int64, newID: () -> String,
              canJoin: (String) -> Bool) -> Result<DeviceGroupChange, DeviceGroupError> {
        switch operation {
        case .create(let name, let tokens):
            if group(name: name, sender: sender) != nil { return .failure(.alreadyExists) }
            // Tokens that cannot join are dropped; only when none is left is it an error (what
            // client libraries report of the real service: "invalid registration tokens are dropped").
            let joining = Self.unique(tokens).filter(canJoin)
            if joining.isEmpty { return .failure(.noValidRegistrationIDs) }
            if joining.count > Self.maximumMembers { return .failure(.tooManyMembers(limit: Self.maximumMembers)) }
            return .success(.save(DeviceGroupRecord(id: newID(), senderID: sender, name: name, members: joining, createdAt: now)))
        case .add(let key, let name, let tokens):
            guard var g = group(key: key, sender: sender) else { return .failure(.notFound) }
            if let name, name != g.name { return .failure(.nameMismatch) }
            let valid = Self.unique(tokens).filter(canJoin)
            if valid.isEmpty { return .failure(.noValidRegistrationIDs) }
            let new = valid.filter { !g.members.contains($0) }
            if g.members.count + new.count > Self.maximumMembers { return .failure(.tooManyMembers(limit: Self.maximumMembers)) }
            g.members += new
            return .success(.save(g))
        case .remove(let key, let name, let tokens):
            guard var g = group(key: key, sender: sender) else { return .failure(.notFound) }
            if let name, name != g.name { return .failure(.nameMismatch) }
            let leaving = Set(tokens).intersection(g.members)
            if leaving.isEmpty { return .failure(.noValidRegistrationIDs) }
            g.members.removeAll { leaving.contains($0) }
            return .success(g.members.isEmpty ? .delete(g) : .save(g))
        }
    }

    /// The group without the members a send found dead (uninstalled or unknown tokens); nil when
    /// none of them is still a member. The group stays even when it ends up empty: FCM pruned dead
    /// tokens on its own and left such a group answering sends with 0 and 0 (spec §6.2, gcm#179).
    package func pruning(_ dead: Set<String>, fromGroup id: String) -> DeviceGroupRecord? {
        guard var g = byID[id], g.members.contains(where: dead.contains) else { return nil }
        g.members.removeAll { dead.contains($0) }
        return g
    }

    package mutating func apply(_ change: DeviceGroupChange) {
        switch change {
        case .save(let g): remove(id: g.id); insert(g)
        case .delete(let g): remove(id: g.id)
        }
    }

    /// Undoes `apply(change)` when `before` was the group's record before it (nil: it did not exist).
    package mutating func restore(_ before: DeviceGroupRecord?, id: String) {
        remove(id: id)
        if let before { insert(before) }
    }

    package mutating func removeAll() {
        self = DeviceGroupRegistry()
    }

    package mutating func removeAll(sender: String) {
        for g in groups(sender: sender) { remove(id: g.id) }
    }

    private mutating func insert(_ g: DeviceGroupRecord) {
        byID[g.id] = g
        idByName[NameKey(sender: g.senderID, name: g.name)] = g.id
        for t in g.members { idsByToken[t, default: []].insert(g.id) }
    }

    private mutating func remove(id: String) {
        guard let old = byID.removeValue(forKey: id) else { return }
        idByName[NameKey(sender: old.senderID, name: old.name)] = nil
        for t in old.members {
            idsByToken[t]?.remove(id)
            if idsByToken[t]?.isEmpty == true { idsByToken[t] = nil }
        }
    }

    private static func unique(_ tokens: [String]) -> [String] {
        var seen = Set<String>()
        return tokens.filter { seen.insert($0).inserted }
    }
}
