import CCSProtocol
import CCSStore
import DequeModule
import Logging
import Synchronization

public enum AuthMode: String, Sendable, CaseIterable {
    /// Any all-digits sender ID with any non-empty key is accepted and provisioned.
    case permissive
    /// Only sender IDs and keys from the configuration file.
    case strict
}

public enum RegistrationError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidRequest(String)
    case unknownSender(String)
    case unknownDevice(String)
    case storeFailure(String)

    public var description: String {
        switch self {
        case .invalidRequest(let s): return s
        case .unknownSender(let s): return "sender \(s) is not configured (strict auth mode)"
        case .unknownDevice(let s): return "no device with token \(s)"
        case .storeFailure(let s): return "could not store the change: \(s)"
        }
    }
}

/// The domain: senders, devices, their queues, app-server connections, upstream traffic and receipts.
///
/// It knows nothing of sockets: connections reach it through calls, and it reaches them through
/// `DeviceLink` / `AppServerLink`, always outside its lock. Every state change that must survive a
/// crash goes through the `GroupCommitter`; answers that promise durability (ACKs to app servers,
/// `sent` to devices) are given only from its completions. Time comes from `clock` alone.
public final class Engine: Sendable {
    public struct Configuration: Sendable {
        public var authMode: AuthMode
        /// sender ID → server key, from the configuration file.
        public var configuredSenders: [String: String]
        public var maxSendersPerDevice: Int
        /// Distinct collapse keys stored per device and app (FCM: 4).
        public var maxCollapseKeys: Int
        /// Non-collapsible messages stored per device and app (FCM: 100).
        public var maxStoredNonCollapsible: Int
        /// Unacknowledged upstream messages and receipts per app-server connection.
        public var maxUnackedOutbound: Int
        /// Unacknowledged outbound messages are sent again after this long.
        public var ackTimeoutMillis: Int64
        /// Upstream messages a device may have waiting for app servers.
        public var maxPendingUpstreamPerDevice: Int
        /// Parallel app-server connections per sender ID (GCM: 1000).
        public var maxConnectionsPerSender: Int
        /// Upstream messages and receipts kept per sender while no app server takes them; beyond it the
        /// oldest are dropped, so that an app server that never ACKs cannot grow memory without bound.
        public var maxPendingOutboundPerSender: Int

        public init(authMode: AuthMode = .permissive, configuredSenders: [String: String] = [:],
                    maxSendersPerDevice: Int = 100, maxCollapseKeys: Int = 4, maxStoredNonCollapsible: Int = 100,
                    maxUnackedOutbound: Int = 100, ackTimeoutMillis: Int64 = 60_000,
                    maxPendingUpstreamPerDevice: Int = 1000, maxConnectionsPerSender: Int = 1000,
                    maxPendingOutboundPerSender: Int = 100_000) {
            self.authMode = authMode
            self.configuredSenders = configuredSenders
            self.maxSendersPerDevice = maxSendersPerDevice
            self.maxCollapseKeys = maxCollapseKeys
            self.maxStoredNonCollapsible = maxStoredNonCollapsible
            self.maxUnackedOutbound = maxUnackedOutbound
            self.ackTimeoutMillis = ackTimeoutMillis
            self.maxPendingUpstreamPerDevice = maxPendingUpstreamPerDevice
            self.maxConnectionsPerSender = maxConnectionsPerSender
            self.maxPendingOutboundPerSender = maxPendingOutboundPerSender
        }
    }

    struct InFlightDownstream {
        var message: QueuedMessage
        var toTray: Bool
        /// Handed over before it was committed: its write may still be called off, and then the
        /// app server's ACK comes from the device's confirmation instead of the commit.
        var early: EarlyDelivery? = nil
    }

    struct EarlyDelivery {
        let ticket: WriteTicket
        let settle: @Sendable (SendResult) -> Void
    }

    struct OnlineDevice {
        let link: any DeviceLink
        /// The device's platform (fixed for a registration), kept here for the hand-over path.
        var platform: String?
        /// False until the queue as of connection time has been read and handed over.
        var loaded = false
        /// Written to this connection and not yet ACKed by the device.
        var inFlight: [String: InFlightDownstream] = [:]
    }

    struct SentOutbound {
        var record: OutboundRecord
        var sentAt: Int64
    }

    /// An outbound item is one device's: two devices may use the same upstream message id, and an
    /// app server may reuse a message id (and so a receipt id) for two devices.
    struct OutboundKey: Hashable {
        var kind: String
        var token: String
        var messageID: String
    }

    struct ConnectionEntry {
        var info: AppServerConnectionInfo
        let link: any AppServerLink
        /// Upstream messages and receipts written to this connection and not yet ACKed.
        var inFlight: [OutboundKey: SentOutbound] = [:]

        /// The in-flight item an app server's ACK of `messageID` (receipts with or without `dr2:`)
        /// means: the one from the device named by `to` when there is one, else the oldest with that id
        /// (a receipt's ACK carries no device; same-id receipts are then ACKed oldest first).
        func acknowledged(messageID: String, to: String?) -> OutboundKey? {
            if let to, inFlight[OutboundKey(kind: "upstream", token: to, messageID: messageID)] != nil {
                return OutboundKey(kind: "upstream", token: to, messageID: messageID)
            }
            let receiptID = DeliveryReceipt.messageIDPrefix + messageID
            var best: (key: OutboundKey, sent: SentOutbound)?
            for (key, sent) in inFlight where key.messageID == messageID || key.messageID == receiptID {
                if key.token == to { return key }
                if best == nil || (sent.sentAt, sent.record.createdAt) < (best!.sent.sentAt, best!.sent.record.createdAt) {
                    best = (key, sent)
                }
            }
            return best?.key
        }
    }

    struct State {
        var senders: [String: SenderRecord] = [:]
        var devices: [String: DeviceRecord] = [:]
        var deviceStates: [String: DeviceState] = [:]
        var tokenByDeviceID: [String: String] = [:]
        var online: [String: OnlineDevice] = [:]
        var connections: [String: ConnectionEntry] = [:]
        var connectionsBySender: [String: [String]] = [:]
        /// Outbound messages per sender not on any connection, oldest first.
        var outboundPending: [String: Deque<OutboundRecord>] = [:]
        var lastMicros: Int64 = 0
        var roundRobin = 0
        /// Tray entries being tapped ("token id"): a second tap of the same one finds nothing.
        var taps: Set<String> = []
    }

    public let configuration: Configuration
    public let clock: any EngineClock
    public let committer: GroupCommitter
    public var store: Store { committer.store }
    let logger: Logger
    let state: Mutex<State>

    public init(committer: GroupCommitter, clock: any EngineClock, configuration: Configuration,
                logger: Logger = Logger(label: "ccs.engine")) throws {
        self.committer = committer
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
        var s = State()
        for sender in try committer.store.loadSenders() { s.senders[sender.senderID] = sender }
        for device in try committer.store.loadDevices() {
            s.devices[device.token] = device
            s.deviceStates[device.token] = DeviceState(json: device.state)
            s.tokenByDeviceID[device.deviceID] = device.token
        }
        s.lastMicros = try committer.store.largestMessageMicros()
        for record in try committer.store.loadOutbound() {
            s.outboundPending[record.senderID, default: []].append(record)
        }
        state = Mutex(s)
    }

    // MARK: app servers

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
            let now = clock.nowMillis()
            let new: SenderRecord? = state.withLock { s in
                if s.senders[senderID] != nil { return nil }
                let record = SenderRecord(senderID: senderID, serverKey: key, createdAt: now)
                s.senders[senderID] = record
                return record
            }
            if let new { committer.submit(.upsertSender(new)) }
            return .accepted
        }
    }

    static func isSenderID(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 32 && s.utf8.allSatisfy { $0 >= 48 && $0 <= 57 }
    }

    /// Registers a bound app-server connection; false when the sender already has as many
    /// connections as allowed (the caller closes it).
    @discardableResult
    public func connectionOpened(_ info: AppServerConnectionInfo, link: any AppServerLink) -> Bool {
        let result = state.withLock { s -> [Send]? in
            if (s.connectionsBySender[info.senderID]?.count ?? 0) >= configuration.maxConnectionsPerSender { return nil }
            s.connections[info.id] = ConnectionEntry(info: info, link: link)
            s.connectionsBySender[info.senderID, default: []].append(info.id)
            return dispatchOutbound(sender: info.senderID, &s)
        }
        guard let sends = result else { return false }
        perform(sends)
        return true
    }

    public func connectionCount(senderID: String) -> Int {
        state.withLock { $0.connectionsBySender[senderID]?.count ?? 0 }
    }

    /// Ends every connection, app servers' and devices' (shutdown, after draining).
    public func closeAllConnections() {
        let links: [any AppServerLink] = state.withLock { $0.connections.values.map(\.link) }
        let devices: [any DeviceLink] = state.withLock { $0.online.values.map(\.link) }
        for l in links { l.close() }
        for d in devices { d.close() }
    }

    /// The connection is gone: whatever it had not ACKed goes to the sender's other connections.
    public func connectionClosed(id: String) {
        let sends = state.withLock { s -> [Send] in
            guard let entry = s.connections.removeValue(forKey: id) else { return [] }
            let sender = entry.info.senderID
            s.connectionsBySender[sender]?.removeAll { $0 == id }
            requeue(entry.inFlight.values.map(\.record), sender: sender, &s)
            return dispatchOutbound(sender: sender, &s)
        }
        perform(sends)
    }

    /// Draining: the connection takes no new outbound traffic; what it holds unACKed stays there
    /// until it ACKs or closes.
    public func connectionDraining(id: String) {
        let sends = state.withLock { s -> [Send] in
            guard let sender = s.connections[id]?.info.senderID else { return [] }
            return dispatchOutbound(sender: sender, &s)
        }
        perform(sends)
    }

    public struct ConnectionSnapshot: Sendable {
        public var info: AppServerConnectionInfo
        public var pending: Int
        public var draining: Bool
        public var unackedOutbound: Int
    }

    public func connections() -> [ConnectionSnapshot] {
        let entries = state.withLock { Array($0.connections.values) }
        return entries.map {
            ConnectionSnapshot(info: $0.info, pending: $0.link.pendingCount, draining: $0.link.isDraining,
                               unackedOutbound: $0.inFlight.count)
        }.sorted { $0.info.connectedAtMillis < $1.info.connectedAtMillis }
    }

    /// Starts draining one connection; false if there is no such connection.
    @discardableResult
    public func drain(connectionID: String) -> Bool {
        guard let link = state.withLock({ $0.connections[connectionID]?.link }) else { return false }
        link.drain()
        return true
    }

    public func drainAll() {
        for link in state.withLock({ $0.connections.values.map(\.link) }) { link.drain() }
    }

    /// The one entry for downstream messages, whichever API they came in through. `completion` runs
    /// exactly once, with one result per token of the target (in its order); an acceptance only after
    /// the message is committed or delivered (or deliberately not stored: dry run, TTL 0).
    public func send(_ request: SendRequest, completion: @escaping @Sendable ([SendResult]) -> Void) {
        switch request.target {
        case .token(let token):
            send(request.message, to: token, senderID: request.sender) { completion([$0]) }
        case .tokens(let tokens):
            let gathered = ResultsInOrder(count: tokens.count, completion: completion)
            for (index, token) in tokens.enumerated() {
                send(request.message, to: token, senderID: request.sender) { gathered.set(index, $0) }
            }
        case .topic(let name):
            completion([.refused(.unsupportedTarget(kind: "topic", target: "/topics/" + name))])
        case .condition(let condition):
            completion([.refused(.unsupportedTarget(kind: "condition", target: condition))])
        case .group(let key):
            completion([.refused(.unsupportedTarget(kind: "device group", target: key))])
        }
    }

    /// One message to one token.
    func send(_ message: Message, to: String, senderID: String, completion: @escaping @Sendable (SendResult) -> Void) {
        let now = clock.nowMillis()
        let lookup: Lookup = state.withLock { s in
            guard let device = s.devices[to] else { return .refused(.invalidRegistration(token: to)) }
            if device.status != "active" { return .refused(.unregistered(token: to)) }
            guard device.senders.contains(senderID) else { return .refused(.senderMismatch(token: to, sender: senderID)) }
            if let package = message.restrictedPackageName, package != device.app {
                return .refused(.packageMismatch(token: to, package: package))
            }
            let id = DeviceMessageID.make(micros: nextMicros(&s), senderHash: DeviceMessageID.senderHash(senderID))
            let deviceState = s.deviceStates[to] ?? DeviceState()
            let takesNow = s.online[to]?.loaded == true
            return .found(app: device.app, platform: device.platform, id, deviceState, takesNow)
        }
        let app: String, platform: String, deviceMessageID: String, deviceState: DeviceState, online: Bool
        switch lookup {
        case .refused(let error): completion(.refused(error)); return
        case .found(let a, let p, let id, let st, let o): (app, platform, deviceMessageID, deviceState, online) = (a, p, id, st, o)
        }
        if message.dryRun {
            completion(.accepted(token: to, deviceMessageID: nil))
            return
        }
        let queued = Self.queuedMessage(message, token: to, app: app, senderID: senderID,
                                        deviceMessageID: deviceMessageID, now: now)
        let deliverableNow = online && deviceState.admits(queued, platform: platform)
        if message.timeToLive == 0 && !deliverableNow {
            // "Now or never": the device cannot take it now, so it is dropped, never stored.
            completion(.accepted(token: to, deviceMessageID: nil))
            return
        }
        let ticket = deliverableNow ? WriteTicket() : nil
        let early = ticket.map { EarlyDelivery(ticket: $0, settle: completion) }
        let limits = deliverableNow ? nil : storageLimits(token: to, senderID: senderID, now: now)
        // The installation check and the write's submission share one critical section: an uninstall
        // (which marks the device and submits its queue's removal under this lock) comes either before
        // (NACK) or after (its removal follows this write), never between.
        let plan = state.withLock { s -> DownstreamPlan in
            guard s.devices[to]?.status == "active" else { return .unregistered }
            if let early, let ticket, s.online[to]?.loaded == true {
                // The device can take it now: hand it over at once and write it in the background. If
                // the device confirms it before the writer gets to it, the write is called off and the
                // ACK follows the confirmation; otherwise the ACK follows the commit, as for every message.
                let sends = take([queued], token: to, early: early, &s)
                if !sends.isEmpty {
                    // The collapse is not called off with the write: an older message with this key
                    // held back (Doze) must go even when this one never reaches the disk.
                    if let key = queued.collapseKey { committer.submit(.collapse(token: to, collapseKey: key)) }
                    committer.submit([.enqueue(queued, limits: nil)], ticket: ticket) { [self] error in
                        completion(outcome(storing: queued, error: error))
                    }
                    return .live(sends)
                }
                // It went offline (or to sleep) in between: store it like any other message.
                if message.timeToLive == 0 { return .dropped }
            }
            committer.submit(.enqueue(queued, limits: limits ?? storageLimits(token: to, senderID: senderID, now: now))) { [self] error in
                if error == nil { handOver([queued], to: to) }
                completion(outcome(storing: queued, error: error))
            }
            return .stored
        }
        switch plan {
        case .live(let sends): perform(sends)
        case .stored: break
        case .dropped: completion(.accepted(token: to, deviceMessageID: nil))
        case .unregistered: completion(.refused(.unregistered(token: to)))
        }
    }

    private enum DownstreamPlan {
        case live([Send])
        case stored
        case dropped
        case unregistered
    }

    private func storageLimits(token: String, senderID: String, now: Int64) -> QueueLimits {
        QueueLimits(maxCollapseKeys: configuration.maxCollapseKeys,
                    maxNonCollapsible: configuration.maxStoredNonCollapsible,
                    overflowNotice: deletedMessagesNotice(token: token, senderID: senderID, now: now))
    }

    /// The answer once the message's write has committed (accepted) or failed (internal error).
    private func outcome(storing queued: QueuedMessage, error: Error?) -> SendResult {
        guard let error else { return .accepted(token: queued.token, deviceMessageID: queued.deviceMessageID) }
        logger.error("enqueue failed", metadata: ["error": "\(error)"])
        return .refused(.internalError)
    }

    private enum Lookup {
        case refused(SendError)
        case found(app: String, platform: String, String, DeviceState, Bool)
    }

    func nextMicros(_ s: inout State) -> Int64 {
        let micros = max(clock.nowMicros(), s.lastMicros + 1)
        s.lastMicros = micros
        return micros
    }

    static func queuedMessage(_ m: Message, token: String, app: String, senderID: String,
                              deviceMessageID: String, now: Int64) -> QueuedMessage {
        let isNotification = m.notification != nil
        let priority = m.effectivePriority
        // Notification messages are always collapsible: without a key, the app's package is the key.
        let collapseKey = m.collapseKey ?? (isNotification ? app : nil)
        // Keys in sorted order, as JSONValue.encoded() would write them.
        var payload = JSONObjectWriter()
        if let ck = m.collapseKey { payload.add("collapse_key", ck) }
        if let ca = m.contentAvailable { payload.add("content_available", ca) }
        if let data = m.data { payload.add("data", stringMap: data) }
        payload.add("from", senderID)
        payload.add("message_id", deviceMessageID)
        if let mc = m.mutableContent { payload.add("mutable_content", mc) }
        if let n = m.notification { payload.add("notification", json: n) }
        payload.add("original_priority", priority.rawValue)
        payload.add("priority", priority.rawValue)
        payload.add("sent_time", now)
        payload.add("ttl", Int64(m.timeToLive))
        return QueuedMessage(token: token, deviceMessageID: deviceMessageID, senderID: senderID,
                             appMessageID: m.messageID, collapseKey: collapseKey, priority: priority.rawValue,
                             timeToLive: m.timeToLive, enqueuedAt: now,
                             expiresAt: now + Int64(m.timeToLive) * 1000,
                             deliveryReceiptRequested: m.deliveryReceiptRequested,
                             delayWhileIdle: m.delayWhileIdle, isNotification: isNotification,
                             payload: payload.finished(), platformBlocks: platformBlocks(m))
    }

    /// HTTP v1's platform blocks, kept with the stored message for the platform views to come.
    static func platformBlocks(_ m: Message) -> String? {
        var blocks: [String: JSONValue] = [:]
        if let android = m.android { blocks["android"] = android }
        if let apns = m.apns { blocks["apns"] = apns }
        if let webpush = m.webpush { blocks["webpush"] = webpush }
        return blocks.isEmpty ? nil : JSONValue.object(blocks).encoded()
    }

    func deletedMessagesNotice(token: String, senderID: String, now: Int64) -> QueuedMessage {
        let id = "deleted:\(now)"
        let payload = JSONValue.object([
            "message_type": .string("deleted_messages"), "message_id": .string(id), "sent_time": .int(now),
        ]).encoded()
        return QueuedMessage(token: token, deviceMessageID: id, senderID: senderID, appMessageID: "",
                             collapseKey: nil, priority: Priority.high.rawValue,
                             timeToLive: Message.maximumTimeToLive, enqueuedAt: now,
                             expiresAt: now + Int64(Message.maximumTimeToLive) * 1000,
                             deliveryReceiptRequested: false, kind: "deleted_messages", payload: payload)
    }

    // MARK: effects outside the lock

    enum Send {
        case device(any DeviceLink, [DeviceDelivery])
        case appServer(any AppServerLink, [OutboundMessage])
    }

    func perform(_ sends: [Send]) {
        for send in sends {
            switch send {
            case .device(let link, let deliveries): link.deliver(deliveries)
            case .appServer(let link, let messages): link.sendOutbound(messages)
            }
        }
    }

    static func randomHex(_ count: Int) -> String {
        var g = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef")
        return String((0..<count).map { _ in digits[Int(g.next() % 16)] })
    }
}

extension String {
    var trimmingWhitespace: String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}

/// Results for a multicast, handed over in the request's order once every token has its answer.
final class ResultsInOrder: Sendable {
    private let state: Mutex<(results: [SendResult?], missing: Int)>
    private let completion: @Sendable ([SendResult]) -> Void

    init(count: Int, completion: @escaping @Sendable ([SendResult]) -> Void) {
        state = Mutex((Array(repeating: nil, count: count), count))
        self.completion = completion
        if count == 0 { completion([]) }
    }

    func set(_ index: Int, _ result: SendResult) {
        let done: [SendResult]? = state.withLock { s in
            guard s.results[index] == nil else { return nil }
            s.results[index] = result
            s.missing -= 1
            return s.missing == 0 ? s.results.map { $0! } : nil
        }
        if let done { completion(done) }
    }
}
