import StoreModel

/// Who exists: the senders, one record per app installation (keyed by its first registration
/// token), each device's state (online/offline, Doze, app in foreground), and the indexes that find
/// an installation by device id, by a token it was given later (a refresh) or by its APNs device
/// token. What the registry holds is what the store holds: every change is written by the
/// operation that makes it (Engine+Devices.swift).
///
/// The five device maps are kept in step here and only here: callers add, update or remove an
/// installation in one call.
package struct Registry {
    package init() {}

    package private(set) var senders: [String: SenderRecord] = [:]
    package private(set) var devices: [String: DeviceRecord] = [:]
    /// `DeviceState(json: devices[token].state)`, decoded once per change.
    package private(set) var deviceStates: [String: DeviceState] = [:]
    package private(set) var tokenByDeviceID: [String: String] = [:]
    /// APNs device token → the registration token of its newest registration.
    package private(set) var apnsTokens: [String: String] = [:]
    /// A refreshed token → the token of its installation (the key of `devices`, queues and links).
    package private(set) var aliases: [String: String] = [:]

    /// The installation `token` names: by its first token (its key, `DeviceRecord.token`) or by one
    /// it was given later. Nil for a token no installation has had.
    package func installation(_ token: String) -> DeviceRecord? {
        if let device = devices[token] { return device }
        return aliases[token].flatMap { devices[$0] }
    }

    /// The active installation that holds `apnsToken`, if any.
    package func holder(ofAPNsToken apnsToken: String) -> DeviceRecord? {
        apnsTokens[apnsToken].flatMap { devices[$0] }
    }

    // MARK: senders

    package mutating func setSender(_ record: SenderRecord) {
        senders[record.senderID] = record
    }

    package mutating func removeSender(_ senderID: String) {
        senders[senderID] = nil
    }

    /// Every sender at once (a start, or another node's full reload); a later duplicate wins.
    package mutating func replaceSenders(_ records: [SenderRecord]) {
        senders = Dictionary(records.map { ($0.senderID, $0) }, uniquingKeysWith: { $1 })
    }

    // MARK: installations

    /// Indexes a registration (read from the store, new, or replacing the one with its token); a
    /// later one with the same APNs token wins it.
    package mutating func add(_ record: DeviceRecord) {
        if let old = devices[record.token] { unindex(old) }
        devices[record.token] = record
        deviceStates[record.token] = DeviceState(json: record.state)
        tokenByDeviceID[record.deviceID] = record.token
        if let apns = record.apnsToken { apnsTokens[apns] = record.token }
        for t in record.refreshedTokens { aliases[t] = record.token }
    }

    /// The same installation changed (its state, status, senders or refreshed tokens). Its device
    /// id and APNs token keep their holders: a newer registration that won the APNs token keeps it.
    package mutating func update(_ record: DeviceRecord, state: DeviceState? = nil) {
        if let old = devices[record.token] { removeAliases(of: old) }
        devices[record.token] = record
        deviceStates[record.token] = state ?? DeviceState(json: record.state)
        for t in record.refreshedTokens { aliases[t] = record.token }
    }

    /// Forgets one installation and every index that points at it.
    package mutating func remove(_ token: String) {
        guard let old = devices.removeValue(forKey: token) else { return }
        deviceStates[token] = nil
        unindex(old)
    }

    /// Forgets every installation and its indexes; the senders stay.
    package mutating func removeAllDevices() {
        (devices, deviceStates, tokenByDeviceID, apnsTokens, aliases) = ([:], [:], [:], [:], [:])
    }

    /// Puts back the installations of an earlier copy (an undone reset); senders provisioned since stay.
    package mutating func restoreDevices(from before: Registry) {
        let senders = self.senders
        self = before
        self.senders = senders
    }

    private mutating func unindex(_ record: DeviceRecord) {
        if tokenByDeviceID[record.deviceID] == record.token { tokenByDeviceID[record.deviceID] = nil }
        if let apns = record.apnsToken, apnsTokens[apns] == record.token { apnsTokens[apns] = nil }
        removeAliases(of: record)
    }

    private mutating func removeAliases(of record: DeviceRecord) {
        for t in record.refreshedTokens where aliases[t] == record.token { aliases[t] = nil }
    }
}
