import StoreModel

extension Engine {
    /// Who exists: the senders, one record per app installation (keyed by its first registration
    /// token), each device's state (online/offline, Doze, app in foreground), and the indexes that find
    /// an installation by device id, by a token it was given later (a refresh) or by its APNs device
    /// token. What the registry holds is what the store holds: every change is written by the
    /// operation that makes it (Engine+Devices.swift).
    struct Registry {
        var senders: [String: SenderRecord] = [:]
        var devices: [String: DeviceRecord] = [:]
        var deviceStates: [String: DeviceState] = [:]
        var tokenByDeviceID: [String: String] = [:]
        /// APNs device token → the registration token of its newest registration.
        var apnsTokens: [String: String] = [:]
        /// A refreshed token → the token of its installation (the key of `devices`, queues and links).
        var aliases: [String: String] = [:]

        /// The installation `token` names: by its first token (its key, `DeviceRecord.token`) or by one
        /// it was given later. Nil for a token no installation has had.
        func installation(_ token: String) -> DeviceRecord? {
            if let device = devices[token] { return device }
            return aliases[token].flatMap { devices[$0] }
        }

        /// Indexes a registration (read from the store, or new); a later one with the same APNs token wins it.
        mutating func add(_ record: DeviceRecord) {
            devices[record.token] = record
            deviceStates[record.token] = DeviceState(json: record.state)
            tokenByDeviceID[record.deviceID] = record.token
            if let apns = record.apnsToken { apnsTokens[apns] = record.token }
            addAliases(of: record)
        }

        /// Forgets every installation and its indexes; the senders stay.
        mutating func removeAllDevices() {
            (devices, deviceStates, tokenByDeviceID, apnsTokens, aliases) = ([:], [:], [:], [:], [:])
        }

        mutating func addAliases(of record: DeviceRecord) {
            for t in record.refreshedTokens { aliases[t] = record.token }
        }

        mutating func removeAliases(of record: DeviceRecord) {
            for t in record.refreshedTokens where aliases[t] == record.token { aliases[t] = nil }
        }
    }
}
