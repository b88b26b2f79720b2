import CCSProtocol
import CCSStore
import Logging
import Synchronization

public enum AuthMode: String, Sendable, CaseIterable {
    /// Any all-digits sender ID with any non-empty key is accepted and provisioned.
    case permissive
    /// Only sender IDs and keys from the configuration file.
    case strict
}

/// The answer to one downstream message.
public enum DownstreamOutcome: Sendable, Equatable {
    /// ACK; `from` is the message's target.
    case ack(from: String)
    case nack(Nack)
}

public enum RegistrationError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidRequest(String)
    case unknownSender(String)
    case storeFailure(String)

    public var description: String {
        switch self {
        case .invalidRequest(let s): return s
        case .unknownSender(let s): return "sender \(s) is not configured (strict auth mode)"
        case .storeFailure(let s): return "could not store the registration: \(s)"
        }
    }
}

/// The domain: senders, devices, their queues, app-server connections.
///
/// It knows nothing of sockets: connections reach it through calls, and it reaches them through
/// `DeviceLink` / `AppServerLink`. All state changes that must survive a crash go through the
/// `GroupCommitter`; answers that promise durability (ACKs) are given only from its completions.
public final class Engine: Sendable {
    public struct Configuration: Sendable {
        public var authMode: AuthMode
        /// sender ID → server key, from the configuration file.
        public var configuredSenders: [String: String]
        public var maxSendersPerDevice: Int

        public init(authMode: AuthMode = .permissive, configuredSenders: [String: String] = [:],
                    maxSendersPerDevice: Int = 100) {
            self.authMode = authMode
            self.configuredSenders = configuredSenders
            self.maxSendersPerDevice = maxSendersPerDevice
        }
    }

    struct OnlineDevice {
        let link: any DeviceLink
        /// False until the queue as of connection time has been read and handed over.
        var loaded = false
        /// Device message ids written to this connection and not yet ACKed.
        var inFlight: Set<String> = []
    }

    struct ConnectionEntry {
        var info: AppServerConnectionInfo
        let link: any AppServerLink
    }

    struct State {
        var senders: [String: SenderRecord] = [:]
        var devices: [String: DeviceRecord] = [:]
        var tokenByDeviceID: [String: String] = [:]
        var online: [String: OnlineDevice] = [:]
        var connections: [String: ConnectionEntry] = [:]
        var lastMicros: Int64 = 0
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
            s.tokenByDeviceID[device.deviceID] = device.token
        }
        state = Mutex(s)
    }

    // MARK: app servers

    /// Checks SASL credentials; in permissive mode a new sender is provisioned on first use.
    public func authenticateAppServer(senderID: String, key: String) -> Bool {
        guard !senderID.isEmpty, senderID.allSatisfy({ $0.isASCII && $0.isNumber }), !key.isEmpty else {
            return false
        }
        switch configuration.authMode {
        case .strict:
            return configuration.configuredSenders[senderID] == key
        case .permissive:
            let now = clock.nowMillis()
            let new: SenderRecord? = state.withLock { s in
                if s.senders[senderID] != nil { return nil }
                let record = SenderRecord(senderID: senderID, serverKey: key, createdAt: now)
                s.senders[senderID] = record
                return record
            }
            if let new { committer.submit(.upsertSender(new)) }
            return true
        }
    }

    public func connectionOpened(_ info: AppServerConnectionInfo, link: any AppServerLink) {
        state.withLock { $0.connections[info.id] = ConnectionEntry(info: info, link: link) }
    }

    public func connectionClosed(id: String) {
        _ = state.withLock { $0.connections.removeValue(forKey: id) }
    }

    public struct ConnectionSnapshot: Sendable {
        public var info: AppServerConnectionInfo
        public var pending: Int
        public var draining: Bool
    }

    public func connections() -> [ConnectionSnapshot] {
        let entries = state.withLock { Array($0.connections.values) }
        return entries.map { ConnectionSnapshot(info: $0.info, pending: $0.link.pendingCount, draining: $0.link.isDraining) }
            .sorted { $0.info.connectedAtMillis < $1.info.connectedAtMillis }
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

    /// Accepts one validated downstream message from `senderID`. `completion` runs exactly once, on the
    /// store's writer thread or on the caller's, after the message is committed when the answer is an ACK.
    public func downstream(_ message: DownstreamMessage, senderID: String,
                           completion: @escaping @Sendable (DownstreamOutcome) -> Void) {
        guard let to = message.to else {
            completion(.nack(Nack(messageID: message.messageID, from: message.condition, code: .badRegistration,
                                  description: "Condition messaging is not supported by this emulator yet")))
            return
        }
        if to.hasPrefix("/topics/") {
            completion(.nack(Nack(messageID: message.messageID, from: to, code: .badRegistration,
                                  description: "Topic messaging is not supported by this emulator yet")))
            return
        }
        let nowMillis = clock.nowMillis()
        let lookup: Lookup = state.withLock { s in
            guard let device = s.devices[to] else {
                return .nack(Nack(messageID: message.messageID, from: to, code: .badRegistration,
                                     description: "Invalid token on 'to' field: \(to)"))
            }
            if device.status != "active" {
                return .nack(Nack(messageID: message.messageID, from: to, code: .deviceUnregistered,
                                     description: "Device unregistered"))
            }
            guard device.senders.contains(senderID) else {
                return .nack(Nack(messageID: message.messageID, from: to, code: .badRegistration,
                                     description: "MismatchSenderId"))
            }
            let micros = max(clock.nowMicros(), s.lastMicros + 1)
            s.lastMicros = micros
            let id = DeviceMessageID.make(micros: micros, senderHash: Self.senderHash(senderID))
            return .found(device, id, s.online[to] != nil)
        }
        let device: DeviceRecord, deviceMessageID: String, isOnline: Bool
        switch lookup {
        case .nack(let nack): completion(.nack(nack)); return
        case .found(let d, let id, let online): (device, deviceMessageID, isOnline) = (d, id, online)
        }
        if message.dryRun {
            completion(.ack(from: to))
            return
        }
        let queued = Self.queuedMessage(message, device: device, senderID: senderID,
                                        deviceMessageID: deviceMessageID, now: nowMillis)
        if message.timeToLive == 0 && !isOnline {
            // "Now or never": the device cannot take it now, so it is dropped, never stored.
            completion(.ack(from: to))
            return
        }
        committer.submit(.enqueue(queued)) { [self] error in
            if let error {
                logger.error("enqueue failed", metadata: ["error": "\(error)"])
                completion(.nack(Nack(messageID: message.messageID, from: to, code: .internalServerError,
                                      description: "Internal server error")))
                return
            }
            handOver([queued], to: to)
            completion(.ack(from: to))
        }
    }

    private enum Lookup {
        case nack(Nack)
        case found(DeviceRecord, String, Bool)
    }

    static func senderHash(_ senderID: String) -> UInt32 {
        // FNV-1a: stable across runs (unlike Hasher), which keeps message ids of one sender recognisable.
        var h: UInt32 = 2_166_136_261
        for b in senderID.utf8 { h = (h ^ UInt32(b)) &* 16_777_619 }
        return h
    }

    static func queuedMessage(_ m: DownstreamMessage, device: DeviceRecord, senderID: String,
                              deviceMessageID: String, now: Int64) -> QueuedMessage {
        let isNotification = m.notification != nil
        let priority = m.priority ?? (isNotification ? .high : .normal)
        var payload: [String: JSONValue] = [
            "from": .string(senderID),
            "message_id": .string(deviceMessageID),
            "priority": .string(priority.rawValue),
            "original_priority": .string(priority.rawValue),
            "sent_time": .int(Int64(now)),
            "ttl": .int(Int64(m.timeToLive)),
        ]
        if let ck = m.collapseKey { payload["collapse_key"] = .string(ck) }
        if let data = m.data { payload["data"] = .object(data.mapValues { .string($0) }) }
        if let n = m.notification { payload["notification"] = n }
        if let ca = m.contentAvailable { payload["content_available"] = .bool(ca) }
        if let mc = m.mutableContent { payload["mutable_content"] = .bool(mc) }
        return QueuedMessage(token: device.token, deviceMessageID: deviceMessageID, senderID: senderID,
                             appMessageID: m.messageID, collapseKey: m.collapseKey, priority: priority.rawValue,
                             timeToLive: m.timeToLive, enqueuedAt: now,
                             expiresAt: now + Int64(m.timeToLive) * 1000,
                             deliveryReceiptRequested: m.deliveryReceiptRequested,
                             payload: JSONValue.object(payload).encoded())
    }

    /// Gives committed messages to the device's connection, if it is online and has its backlog.
    func handOver(_ messages: [QueuedMessage], to token: String) {
        let link: (any DeviceLink)? = state.withLock { s in
            guard var online = s.online[token], online.loaded else {
                logger.debug("hand-over deferred", metadata: ["token": "\(token.prefix(12))", "online": "\(s.online[token] != nil)"])
                return nil
            }
            for m in messages { online.inFlight.insert(m.deviceMessageID) }
            s.online[token] = online
            return online.link
        }
        link?.deliver(messages)
    }

    // MARK: devices

    public func registerDevice(app: String, senders: [String], platform: String) async throws(RegistrationError) -> DeviceRecord {
        let app = app.trimmingWhitespace
        guard !app.isEmpty, app.count <= 255 else { throw .invalidRequest("\"app\" must be a non-empty package name") }
        guard platform == "android" || platform == "ios" else {
            throw .invalidRequest("\"platform\" must be \"android\" or \"ios\"")
        }
        var unique: [String] = []
        for s in senders where !unique.contains(s) { unique.append(s) }
        guard !unique.isEmpty else { throw .invalidRequest("\"senders\" must list at least one sender ID") }
        guard unique.count <= configuration.maxSendersPerDevice else {
            throw .invalidRequest("at most \(configuration.maxSendersPerDevice) sender IDs per registration")
        }
        for s in unique where !(s.allSatisfy { $0.isASCII && $0.isNumber }) {
            throw .invalidRequest("sender ID \"\(s)\" is not numeric")
        }
        if configuration.authMode == .strict {
            for s in unique where configuration.configuredSenders[s] == nil { throw .unknownSender(s) }
        }
        let instanceID = RegistrationToken.makeInstanceID()
        let record = DeviceRecord(token: RegistrationToken.make(instanceID: instanceID),
                                  deviceID: Self.randomHex(16), secret: Self.randomHex(32), app: app,
                                  platform: platform, senders: unique, createdAt: clock.nowMillis())
        let result: Error? = await withCheckedContinuation { cont in
            committer.submit(.upsertDevice(record)) { cont.resume(returning: $0) }
        }
        if let result { throw .storeFailure("\(result)") }
        state.withLock { s in
            s.devices[record.token] = record
            s.tokenByDeviceID[record.deviceID] = record.token
        }
        return record
    }

    /// The device's record if `secret` is its device secret.
    public func authenticateDevice(deviceID: String, secret: String) -> DeviceRecord? {
        state.withLock { s in
            guard let token = s.tokenByDeviceID[deviceID], let d = s.devices[token], d.secret == secret,
                  d.status == "active" else { return nil }
            return d
        }
    }

    public func device(token: String) -> DeviceRecord? {
        state.withLock { $0.devices[token] }
    }

    public func allDevices() -> [DeviceRecord] {
        state.withLock { Array($0.devices.values) }.sorted { ($0.createdAt, $0.token) < ($1.createdAt, $1.token) }
    }

    public func isOnline(token: String) -> Bool {
        state.withLock { $0.online[token] != nil }
    }

    /// A device connection is up: it replaces any older connection of the same device and receives
    /// everything stored for it (unexpired), then every message committed later.
    public func deviceConnected(token: String, link: any DeviceLink) {
        let previous: (any DeviceLink)? = state.withLock { s in
            let old = s.online[token]?.link
            s.online[token] = OnlineDevice(link: link)
            return old
        }
        previous?.close()
        committer.afterPendingWrites { [self] in
            let now = clock.nowMillis()
            let stored: [QueuedMessage]
            do { stored = try store.queuedMessages(token: token) } catch {
                logger.error("reading the queue failed", metadata: ["token": "\(token)", "error": "\(error)"])
                stored = []
            }
            var live: [QueuedMessage] = []
            var expired: [StoreOp] = []
            for m in stored {
                if m.expiresAt <= now && m.timeToLive > 0 || m.timeToLive == 0 && m.expiresAt < now {
                    expired.append(.removeMessage(token: token, deviceMessageID: m.deviceMessageID))
                } else {
                    live.append(m)
                }
            }
            if !expired.isEmpty { committer.submit(expired) }
            let current: (any DeviceLink)? = state.withLock { s in
                guard var online = s.online[token], online.link === link else { return nil }
                online.loaded = true
                for m in live { online.inFlight.insert(m.deviceMessageID) }
                s.online[token] = online
                return online.link
            }
            logger.debug("device backlog read", metadata: ["token": "\(token.prefix(12))", "messages": "\(live.count)", "current": "\(current != nil)"])
            if let current, !live.isEmpty { current.deliver(live) }
        }
    }

    public func deviceDisconnected(token: String, link: any DeviceLink) {
        state.withLock { s in
            if let online = s.online[token], online.link === link { s.online.removeValue(forKey: token) }
        }
    }

    /// The device confirmed a message: it leaves the queue for good.
    public func deviceAcknowledged(token: String, deviceMessageID: String) {
        let known = state.withLock { s -> Bool in
            guard var online = s.online[token] else { return false }
            let had = online.inFlight.remove(deviceMessageID) != nil
            s.online[token] = online
            return had
        }
        if known {
            committer.submit(.removeMessage(token: token, deviceMessageID: deviceMessageID))
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
