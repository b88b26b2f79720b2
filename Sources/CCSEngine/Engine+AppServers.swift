import DeliveryCore
import PushDomain
import StoreModel
import Synchronization

/// App-server connections: authentication, the per-sender cap, draining, and what each one holds.
extension Engine {
    /// The answer to an app server's SASL credentials.
    public enum AppServerAuthentication: Sendable, Equatable {
        case accepted
        /// Refused; the reason is for the app server's developer (logged, and sent in the SASL failure).
        case refused(reason: String)
    }

    /// Checks SASL credentials; in permissive mode a new sender is provisioned on first use.
    public func authenticateAppServer(senderID: String, key: String) -> Bool {
        checkAppServer(senderID: senderID, key: key) == .accepted
    }

    /// `authenticateAppServer`, saying why a login is refused.
    public func checkAppServer(senderID: String, key: String) -> AppServerAuthentication {
        guard Self.isSenderID(senderID) else {
            let shown = senderID.isEmpty ? "an empty user name" : "\"\(senderID.prefix(64))\""
            return .refused(reason: "the user name must be a sender ID (1 to 32 digits, optionally followed by @gcm.googleapis.com); got \(shown)")
        }
        guard !key.isEmpty else { return .refused(reason: "the password (the server key) is empty for sender \(senderID)") }
        switch configuration.authMode {
        case .strict:
            guard let expected = configuration.configuredSenders[senderID] else {
                return .refused(reason: "sender \(senderID) is not in the --config file (--auth strict)")
            }
            return expected == key ? .accepted : .refused(reason: "wrong server key for sender \(senderID) (--auth strict)")
        case .permissive:
            recordSender(senderID, key: key)
            return .accepted
        }
    }

    /// Permissive mode's provisioning on first use: the first key a sender is seen with is recorded.
    func recordSender(_ senderID: String, key: String) {
        // Known already (every legacy send of a provisioned sender asks): the hub's copy says so
        // without taking every shard's lock.
        if state.withLock({ $0.registry.senders[senderID] != nil }) { return }
        let now = clock.nowMillis()
        let new: SenderRecord? = everywhere { s in
            if s.registry.senders[senderID] != nil { return nil }
            let record = SenderRecord(senderID: senderID, serverKey: key, createdAt: now)
            s.registry.setSender(record)
            return record
        }
        if let new { committer.submit(.upsertSender(new)) }
    }

    /// The server key a sender is known by: the config file's, else the one it first logged in with
    /// (permissive mode records it). From memory: no store read.
    public func serverKey(ofSender senderID: String) -> String? {
        configuration.configuredSenders[senderID] ?? state.withLock { $0.registry.senders[senderID]?.serverKey }
    }

    public static func isSenderID(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 32 && s.utf8.allSatisfy { $0 >= 48 && $0 <= 57 }
    }

    /// Registers a bound app-server connection; false when the sender already has as many
    /// connections as allowed (the caller closes it).
    @discardableResult
    public func connectionOpened(_ info: AppServerConnectionInfo, link: any AppServerLink) -> Bool {
        let now = clock.nowMillis()
        let actions = state.withLock { s -> [OutboundAction]? in
            // The link may drain already: the router starts with its flag (`connectionDraining` keeps
            // them in step from then on).
            let event = OutboundEvent.connectionOpened(id: info.id, sender: info.senderID, draining: link.isDraining)
            let effects = s.outbound.handle(event, at: now, outboundRules)
            if case .refused? = effects.first { return nil }
            s.appServers[info.id] = AppServerHost(info: info, link: link)
            return apply(effects, &s)
        }
        guard let actions else { return false }
        performOutbound(actions, now: now)
        return true
    }

    public func connectionCount(senderID: String) -> Int {
        state.withLock { $0.outbound.connectionsBySender[senderID]?.count ?? 0 }
    }

    /// Ends every connection, app servers' and devices' (shutdown, after draining).
    public func closeAllConnections() {
        let links: [any AppServerLink] = state.withLock { $0.appServers.values.map(\.link) }
        let devices: [any DeviceLink] = eachShard { s in s.sessions.online.values.compactMap { s.deviceLinks[$0.connection] } }.flatMap { $0 }
        for l in links { l.close() }
        for d in devices { d.close() }
    }

    /// The connection is gone: whatever it had not ACKed goes to the sender's other connections.
    public func connectionClosed(id: String) {
        let now = clock.nowMillis()
        let actions = state.withLock { s in
            s.appServers[id] = nil
            return apply(s.outbound.handle(.connectionClosed(id: id), at: now, outboundRules), &s)
        }
        performOutbound(actions, now: now)
    }

    /// Draining: the connection takes no new outbound traffic; what it holds unACKed stays there
    /// until it ACKs or closes. The link calls this as it starts draining (the only way one does:
    /// `drain(connectionID:)` and `drainAll()` ask the link, which sets its flag and calls here), so
    /// the router's `draining` says what the link's `isDraining` says.
    public func connectionDraining(id: String) {
        handleOutbound(.connectionDraining(id: id))
    }

    public struct ConnectionSnapshot: Sendable {
        public var info: AppServerConnectionInfo
        public var pending: Int
        public var draining: Bool
        public var unackedOutbound: Int
    }

    public func connections() -> [ConnectionSnapshot] {
        let entries = state.withLock { s in
            s.outbound.connections.compactMap { id, entry in s.appServers[id].map { ($0, entry.inFlight.count) } }
        }
        return entries.map { host, unacked in
            ConnectionSnapshot(info: host.info, pending: host.link.pendingCount, draining: host.link.isDraining,
                               unackedOutbound: unacked)
        }.sorted { $0.info.connectedAtMillis < $1.info.connectedAtMillis }
    }

    /// Starts draining one connection; false if there is no such connection.
    @discardableResult
    public func drain(connectionID: String) -> Bool {
        guard let link = state.withLock({ $0.appServers[connectionID]?.link }) else { return false }
        link.drain()
        return true
    }

    public func drainAll() {
        for link in state.withLock({ $0.appServers.values.map(\.link) }) { link.drain() }
    }
}
