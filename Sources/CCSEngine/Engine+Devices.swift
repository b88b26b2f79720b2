import DeliveryCore
import PushDomain
import StoreModel
import FaultInjection

/// Simulated devices: registration, their connections, what they are handed, their states.
extension Engine {
    /// `webSubscription`: required for `.web` (the JS SDK registers the browser's push subscription
    /// with the web app's id as `app`), refused for the other platforms.
    /// `apns`: the iOS app also registers for remote notifications through APNs (its bundle id is `app`);
    /// such a registration may list no sender ID.
    public func registerDevice(app: String, senders: [String], platform: Platform,
                               webSubscription: WebPushSubscription? = nil,
                               apns: APNsTokenRequest? = nil) async throws(DeviceManagementError) -> DeviceRecord {
        var apnsToken: String?
        switch apns {
        case nil: break
        case .generate?: apnsToken = RandomText.hex(64)
        case .token(let given)?:
            let hex = given.lowercased()
            guard hex.utf8.count == 64, hex.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
                throw .invalidRequest("\"apns_token\" must be 64 hexadecimal digits (32 bytes)")
            }
            apnsToken = hex
        }
        let record = try newRegistration(app: app, senders: senders, platform: platform, webSubscription: webSubscription,
                                         apnsToken: apnsToken)
        var ops: [StoreOp] = [.upsertDevice(record)]
        if let apnsToken {
            let holder = state.withLock { s in s.registry.holder(ofAPNsToken: apnsToken) }
            if let holder, holder.status == .active {
                throw .invalidRequest("APNs token \(apnsToken) is registered by an installed app (\(holder.token))")
            }
            // Registered again: the provider must no longer read this token as gone.
            ops.append(.removeAPNsFeedbackToken(bundleID: record.app, deviceToken: apnsToken))
        }
        try await commit(ops)
        everywhere { $0.registry.add(record) }
        registered(record)
        return record
    }

    /// `observer` is called with each registration made from now on (also a reinstall's), once stored.
    public func observeRegistrations(_ observer: @escaping @Sendable (DeviceRecord) -> Void) {
        registrationObservers.withLock { $0.append(RegistrationObserver(call: observer)) }
    }

    func registered(_ record: DeviceRecord) {
        for observer in registrationObservers.withLock({ $0 }) { observer.call(record) }
    }

    /// A new registration (token, device id, secret), checked but not stored yet.
    func newRegistration(app: String, senders: [String], platform: Platform,
                         webSubscription: WebPushSubscription? = nil,
                         apnsToken: String? = nil) throws(DeviceManagementError) -> DeviceRecord {
        if platform == .web && webSubscription == nil {
            throw .invalidRequest("a web device needs \"subscription\" (the browser's PushSubscription: endpoint and keys)")
        }
        if platform != .web && webSubscription != nil {
            throw .invalidRequest("\"subscription\" is for web devices only")
        }
        let app = app.trimmingWhitespace
        guard !app.isEmpty, app.count <= 255 else { throw .invalidRequest("\"app\" must be a non-empty package name") }
        if apnsToken != nil && platform != .ios {
            throw .invalidRequest("an APNs device token needs \"platform\": \"ios\"")
        }
        var unique: [String] = []
        for s in senders where !unique.contains(s) { unique.append(s) }
        guard !unique.isEmpty || apnsToken != nil else { throw .invalidRequest("\"senders\" must list at least one sender ID") }
        guard unique.count <= configuration.maxSendersPerDevice else {
            throw .invalidRequest("at most \(configuration.maxSendersPerDevice) sender IDs per registration")
        }
        for s in unique where !Self.isSenderID(s) { throw .invalidRequest("sender ID \"\(s)\" is not numeric") }
        if configuration.authMode == .strict {
            for s in unique where configuration.configuredSenders[s] == nil { throw .unknownSender(s) }
        }
        let instanceID = RegistrationToken.makeInstanceID()
        let token = RegistrationToken.make(instanceID: instanceID)
        var subscription = webSubscription
        // A subscription the emulator serves is given its endpoint's prefix (`…/fcm/send/`): the path
        // ends in the token, as Chrome's FCM endpoints do, so that the endpoint finds the device.
        if subscription?.serviceKeys != nil { subscription?.endpoint += token }
        return DeviceRecord(token: token,
                            deviceID: RandomText.hex(16), secret: RandomText.hex(32), app: app,
                            platform: platform, senders: unique, createdAt: clock.nowMillis(),
                            state: DeviceState().json, webSubscription: subscription, apnsToken: apnsToken)
    }

    func commit(_ ops: [StoreOp]) async throws(DeviceManagementError) {
        let result: Error? = await withCheckedContinuation { cont in
            committer.submit(ops, urgent: true) { cont.resume(returning: $0) }
        }
        if let result { throw .storeFailure("\(result)") }
    }

    /// What `change` does under the locks, in one shard: the answer, the writes, and how to take the change back.
    struct Change<T: Sendable> {
        var value: T
        var ops: [StoreOp]
        /// Takes the change back; it should touch only what is still as this change left it.
        var undo: @Sendable (inout State) -> Void
        /// The connections the change took offline, to be closed outside the lock.
        var closes: [any DeviceLink] = []
    }

    /// Changes memory and submits the writes that make it durable in one critical section, so the disk
    /// sees changes in the order memory does; then waits for the commit. If it fails, `undo` runs
    /// under the locks and the caller gets `storeFailure`: memory never keeps what the disk refused.
    /// The change is made in every shard (each holds the registry, topics and groups), the hub first:
    /// a refusal there is one everywhere. The writes are the hub's (every shard's are the same); the
    /// connections to close are each shard's own.
    func change<T: Sendable>(_ body: (inout State) -> Result<Change<T>, DeviceManagementError>) async throws(DeviceManagementError) -> T {
        try await change(storeFailure: { .storeFailure($0) }, body)
    }

    /// `change` for commands with their own error type (device groups); `storeFailure` makes one
    /// from a store error's text.
    func change<T: Sendable, E: Error & Sendable>(storeFailure: @escaping @Sendable (String) -> E,
                                                  _ body: (inout State) -> Result<Change<T>, E>) async throws(E) -> T {
        var closing: [any DeviceLink] = []
        let outcome: Result<T, E> = await withCheckedContinuation {
            (cont: CheckedContinuation<Result<T, E>, Never>) in
            let refusal: E? = withEveryShard { held in
                var changes: [Change<T>] = []
                for pointer in held {
                    switch body(&pointer.pointee) {
                    case .failure(let error):
                        if changes.isEmpty { return error }
                        // The shards hold the same registry: what the hub allowed, each allows.
                        logger.error("a shard refused a change the hub made", metadata: ["error": "\(error)"])
                        changes.append(Change(value: changes[0].value, ops: [], undo: { _ in }))
                    case .success(let planned): changes.append(planned)
                    }
                }
                closing = changes.flatMap(\.closes)
                let undos = changes.map(\.undo)
                // The completion takes the locks: the committer never runs it inside `submit`, also
                // not once it has stopped (it then fails later, and the change is taken back then).
                committer.submit(changes[0].ops, urgent: true) { [self, value = changes[0].value] error in
                    guard let error else {
                        cont.resume(returning: .success(value))
                        return
                    }
                    logger.error("a state change could not be stored", metadata: ["error": "\(error)"])
                    withEveryShard { held in for (pointer, undo) in zip(held, undos) { undo(&pointer.pointee) } }
                    cont.resume(returning: .failure(storeFailure("\(error)")))
                }
                return nil
            }
            if let refusal { cont.resume(returning: .failure(refusal)) }
        }
        for link in closing { link.close() }
        return try outcome.get()
    }

    /// The device's record if `secret` is its device secret and its app is installed.
    public func authenticateDevice(deviceID: String, secret: String) -> DeviceRecord? {
        state.withLock { s in
            guard let token = s.registry.tokenByDeviceID[deviceID], let d = s.registry.devices[token], d.secret == secret,
                  d.status == .active else { return nil }
            return d
        }
    }

    /// The installation `token` names: by its first token or by one it was given later (a refresh).
    public func device(token: String) -> DeviceRecord? {
        state.withLock { $0.registry.installation(token) }
    }

    public func deviceState(token: String) -> DeviceState? {
        state.withLock { $0.registry.deviceStates[token] }
    }

    public func allDevices() -> [DeviceRecord] {
        state.withLock { Array($0.registry.devices.values) }.sorted { ($0.createdAt, $0.token) < ($1.createdAt, $1.token) }
    }

    public func isOnline(token: String) -> Bool {
        shard(token).withLock { $0.sessions.online[token] != nil }
    }

    /// A device connection is up: it replaces any older connection of the same device and receives
    /// everything stored for it that it may take, then every message committed later.
    public func deviceConnected(token: String, link: any DeviceLink) {
        // The core closes the device's older connection and asks for the queue's read.
        let sends = shard(token).withLock { s in
            let id = s.deviceLinks.register(link)
            return apply(s.core.deviceConnected(token, connection: id), &s)
        }
        perform(sends)
        // In a cluster the backlog is read once more after the presence is recorded: a message
        // another node commits later is announced here, and one it committed before is in that read
        // (what the first read handed over is not handed over twice).
        cluster?.deviceOnline(token: token) { [self] in
            if shard(token).withLock({ $0.isCurrent(token, link) }) { deliverBacklog(token: token, link: link) }
        }
    }

    /// Reads the queue (after every write submitted so far) and hands over what the device may take
    /// and does not hold yet, as far as its window allows. Marks the connection loaded, so later
    /// commits are handed over directly. A read that fails is never taken as an empty queue
    /// (`backlogReadFailed`).
    func deliverBacklog(token: String, link: any DeviceLink, attempt: Int = 1) {
        committer.afterPendingWrites { [self] in
            let now = clock.nowMillis()
            let stored: [QueuedMessage]
            do { stored = try store.queuedMessages(token: token) } catch {
                return backlogReadFailed(token: token, link: link, attempt: attempt, error: error)
            }
            let sends = shard(token).withLock { s -> [Send] in
                guard let id = s.deviceLinks.id(of: link),
                      let effects = s.core.backlogRead(stored, token: token, connection: id, now: now) else { return [] }
                return apply(effects, &s)
            }
            perform(sends)
        }
    }

    /// Reads of a device's queue made before its connection is closed instead (`backlogReadFailed`).
    static let backlogReadAttempts = 3

    /// A failed read is not "nothing stored": taken so, the connection was marked loaded and the device
    /// got its queue only on its next connection, and Apple's store-and-forward collapse was skipped
    /// (the queue was believed to hold no notification). It is read again, behind what is pending;
    /// after `backlogReadAttempts` the connection is closed, so that the device connects again and
    /// its next bind reads the queue anew. Until a read succeeds nothing is handed over on it (a
    /// message sent meanwhile is stored), so nothing goes ahead of what the queue holds.
    private func backlogReadFailed(token: String, link: any DeviceLink, attempt: Int, error: any Error) {
        let current = shard(token).withLock { s -> Bool in
            guard let id = s.deviceLinks.id(of: link) else { return false }
            return s.core.backlogReadFailed(token: token, connection: id)
        }
        guard current else { return }
        if attempt < Self.backlogReadAttempts {
            logger.warning("reading the queue failed; reading it again",
                           metadata: ["token": "\(token)", "attempt": "\(attempt)", "error": "\(error)"])
            return deliverBacklog(token: token, link: link, attempt: attempt + 1)
        }
        logger.error("reading the queue failed; closing the connection so that the device connects again",
                     metadata: ["token": "\(token)", "error": "\(error)"])
        link.close()
    }

    /// Gives committed messages to the device's connection, if it is online, has its backlog, and may
    /// take them now (Doze). Otherwise they wait in the queue.
    func handOver(_ messages: [QueuedMessage], to token: String) {
        let now = clock.nowMillis()
        let sends = shard(token).withLock { s in apply(s.core.handOver(messages, to: token, now: now), &s) }
        perform(sends)
    }

    /// Performs the core's device effects that belong in its critical section (the writes, in the
    /// core's order, and the throttle's reports) and returns the hand-overs, performed outside it.
    func apply(_ effects: [DeviceEffect], _ s: inout State) -> [Send] {
        var sends: [Send] = []
        for effect in effects {
            switch effect {
            case .write(let ops): committer.submit(ops)
            case .throttled(let m, let detail): journal(.throttled, m, detail: detail)
            case .deliver(let connection, let deliveries, let platform, let app, let background):
                if let link = s.deviceLinks[connection] {
                    sends.append(.device(link, deliveries, platform, app: app, appInBackground: background))
                }
            case .readBacklog(let token, let connection):
                if let link = s.deviceLinks[connection] { sends.append(.readBacklog(token: token, link)) }
            case .release:
                sends += s.release([effect]).map { .close($0) }
            }
        }
        return sends
    }

    /// Messages handed over live whose write is still waiting (the store does not hold them yet).
    private func unwrittenLive(token: String?) -> [QueuedMessage] {
        let pending: [(message: QueuedMessage, ticket: WriteTicket?)]
        if let token {
            pending = shard(token).withLock { s in Self.unwrittenLive(token: token, s) }
        } else {
            pending = eachShard { s in Self.unwrittenLive(token: nil, s) }.flatMap { $0 }
        }
        return pending.filter { $0.ticket?.isPending == true }.map(\.message)
    }

    /// One shard's live messages (of `token`, or of all its devices) with the tickets of their writes.
    /// In one critical section: a message offered to another node's device (`offered`) too.
    private static func unwrittenLive(token: String?, _ s: State) -> [(message: QueuedMessage, ticket: WriteTicket?)] {
        let offered = s.sessions.offered.values.filter { token == nil || $0.message.token == token }
            .map { ($0.message, s.earlyWrite($0.early)?.ticket) }
        let held = token.map { s.sessions.online[$0].map { Array($0.inFlight.values) } ?? [] }
            ?? s.sessions.online.values.flatMap { $0.inFlight.values }
        return held.filter { $0.early != nil }.map { ($0.message, s.earlyWrite($0.early)?.ticket) } + offered
    }

    /// The device's queue as the service holds it: what is stored, plus messages handed to its
    /// connection live whose write is still waiting for the device's confirmation.
    public func queuedMessages(token: String) throws -> [QueuedMessage] {
        // Live first: a write taken in between is then in the store read (never missing from both).
        var live = unwrittenLive(token: token)
        var stored = try store.queuedMessages(token: token)
        let held = Set(stored.map(\.deviceMessageID))
        live.removeAll { held.contains($0.deviceMessageID) }
        if live.isEmpty { return stored }
        stored += live
        return stored.sorted { ($0.enqueuedAt, $0.deviceMessageID) < ($1.enqueuedAt, $1.deviceMessageID) }
    }

    /// Queue lengths per token, counted like `queuedMessages(token:)`.
    public func queueCounts() throws -> [String: Int] {
        let live = unwrittenLive(token: nil)
        var counts = try store.queueCounts()
        for m in live { counts[m.token, default: 0] += 1 }
        return counts
    }

    public func deviceDisconnected(token: String, link: any DeviceLink) {
        let removed = shard(token).withLock { s -> Bool in
            guard let id = s.deviceLinks.id(of: link) else { return false }
            let effects = s.core.deviceDisconnected(token, connection: id)
            _ = s.release(effects)
            return !effects.isEmpty
        }
        if removed { cluster?.deviceOffline(token: token) }
    }

    /// The device confirmed a message: it leaves the queue for good; a requested delivery receipt goes
    /// to the sender; a notification for a backgrounded app lands in the tray.
    public func deviceAcknowledged(token: String, deviceMessageID: String) {
        if faults.isActive(.deviceAck) {
            let sender = shard(token).withLock { $0.sessions.online[token]?.inFlight[deviceMessageID]?.message.senderID }
            let subject = FaultSubject(sender: sender, token: token, messageID: deviceMessageID, origin: "device:\(token)")
            for action in faults.decide(.deviceAck, subject) {
                switch action {
                case .loseDeviceAck:
                    // Stays in flight: handed over again when the device next connects.
                    return
                case .delayDeviceAck(let millis):
                    Task {
                        try? await Task.sleep(for: .milliseconds(millis))
                        self.deviceAcknowledgedNow(token: token, deviceMessageID: deviceMessageID)
                    }
                    return
                default:
                    break
                }
            }
        }
        deviceAcknowledgedNow(token: token, deviceMessageID: deviceMessageID)
    }

    func deviceAcknowledgedNow(token: String, deviceMessageID: String) {
        let now = clock.nowMillis()
        // One critical section: the core's confirmation, the host's call-off of the write, the device.
        typealias Found = (Confirmation, DeliveryCore.ConfirmingDevice?, calledOff: EarlyWrite?, refill: (any DeviceLink)?)
        let found: Found? = shard(token).withLock { s in
            guard let c = s.core.confirm(deviceMessageID, token: token) else { return nil }
            // The host calls the write off (its ticket takes the writer's lock), then tells the core.
            let early = s.forget(c.entry.early)
            let calledOff = c.mayCallOff != nil && early?.ticket.cancel() == true
            s.core.remember(c, token: token, calledOff: calledOff)
            let m = c.entry.message
            let needsDevice = m.deliveryReceiptRequested || m.kind == .apnsNotification || c.entry.toTray
            return (c, needsDevice ? s.core.confirmingDevice(token) : nil, calledOff ? early : nil,
                    c.refill.flatMap { s.deviceLinks[$0] })
        }
        guard let (confirmation, device, calledOff, refill) = found else { return }
        // After this confirmation's removal is submitted: the read then no longer finds it.
        defer { if let refill { deliverBacklog(token: token, link: refill) } }
        let entry = confirmation.entry, m = entry.message
        journal(.deviceAcked, m, token: token)
        if entry.toTray { journal(.shownInTray, m, token: token) }
        if m.kind == .apnsNotification { recordAPNsDelivery(m, deviceToken: device?.apnsToken) }
        let writes = DeliveryCore.confirmationWrites(entry, token: token, calledOff: calledOff != nil, device: device, now: now)
        switch writes.end {
        case .confirmLive(let node): cluster?.confirmLive(deviceMessageID: deviceMessageID, to: node)
        case .calledOff: calledOff?.settle(.accepted(token: token, deviceMessageID: deviceMessageID))
        case .removed: break
        }
        if writes.ops.isEmpty { return }
        committer.submit(writes.ops) { [self, receipt = writes.receipt] error in
            guard error == nil, let receipt else { return }
            enqueueOutbound(receipt)
        }
    }

    // MARK: state changes (device CLI and admin API)

    /// Changes foreground/background and idle/active; leaving idle hands over what Doze held back.
    public func setDeviceState(token: String, foreground: Bool?, idle: Bool?) async throws(DeviceManagementError) -> DeviceState {
        let (newState, woke): (DeviceState, Bool) = try await change { s in
            guard let c = s.core.setState(token, foreground: foreground, idle: idle) else { return .failure(.unknownDevice(token)) }
            return .success(Change(value: (c.state, c.woke), ops: c.ops, undo: { s in s.core.undo(c) }))
        }
        // Leaving Doze, or coming to the foreground (iOS data messages), may release held messages.
        if woke, let link = shard(token).withLock({ $0.link(of: token) }) {
            deliverBacklog(token: token, link: link)
        }
        return newState
    }

    /// The app is uninstalled: the token is dead for good, its queue and tray are dropped, and its
    /// connection is closed. Later downstream to it gets DEVICE_UNREGISTERED.
    public func uninstall(token: String) async throws(DeviceManagementError) {
        let _: Void = try await change { s in
            guard let before = s.registry.installation(token) else { return .failure(.unknownDevice(token)) }
            return .success(Self.uninstalling(before, &s))
        }
    }

    /// Marks the installation removed in memory (`DeliveryCore.uninstall`) and returns the writes that
    /// make it so on disk, the connection to close, and the core's own undo.
    static func uninstalling(_ before: DeviceRecord, replacedBy fresh: DeviceRecord? = nil, _ s: inout State)
        -> Change<Void> {
        let u = s.core.uninstall(before, replacedBy: fresh)
        return Change(value: (), ops: u.ops, undo: { s in s.core.undo(u) }, closes: s.release(u.effects))
    }

    /// Re-installing the app: a fresh registration (new token) for the same app, senders and platform.
    /// The old token stays invalid. One installation is re-installed once: the check, the old token's
    /// removal and the new registration are one change (one transaction).
    public func reinstall(token: String) async throws(DeviceManagementError) -> DeviceRecord {
        guard let old = device(token: token) else { throw .unknownDevice(token) }
        // The same device keeps its APNs token for the app (iOS hands the reinstalled app the same one).
        var subscription = old.webSubscription
        // A subscription the emulator serves ends in its token: the new registration's endpoint ends in
        // the new one (`newRegistration` appends it to the prefix).
        if let s = subscription, s.serviceKeys != nil, s.endpoint.hasSuffix(old.token) {
            subscription?.endpoint = String(s.endpoint.dropLast(old.token.count))
        }
        let fresh = try newRegistration(app: old.app, senders: old.senders, platform: old.platform,
                                        webSubscription: subscription, apnsToken: old.apnsToken)
        let _: Void = try await change { s in
            guard let before = s.registry.devices[old.token] else { return .failure(.unknownDevice(token)) }
            if let newer = before.replacedBy {
                return .failure(.invalidRequest("this installation was already re-installed as \(newer)"))
            }
            return .success(Self.uninstalling(before, replacedBy: fresh, &s))
        }
        registered(fresh)
        return fresh
    }

    /// A token refresh (the app's `onNewToken`): the installation gets a new registration token with
    /// the same instance id, and keeps everything else (queue, tray, topics, groups, state, connection).
    /// Its earlier tokens still reach it; an answer to a message sent to one of them names the newest
    /// as the canonical registration id (docs/semantics.md, "Canonical registration ids"). `token` may
    /// be any of the installation's tokens. Returns the record, `canonicalToken` the new token.
    public func refreshToken(_ token: String) async throws(DeviceManagementError) -> DeviceRecord {
        // The new token keeps the installation's instance id (the part before the colon). Drawn once:
        // the change is made in every shard, which must all give it the same token.
        let instance = device(token: token).flatMap { RegistrationToken.instanceID(of: $0.token) }
            ?? RegistrationToken.makeInstanceID()
        let fresh = RegistrationToken.make(instanceID: instance)
        return try await change { s in
            switch s.core.refresh(token, to: fresh, limit: Self.maximumRefreshedTokens) {
            case .success(let r): return .success(Change(value: r.after, ops: r.ops, undo: { s in s.core.undo(r) }))
            case .failure(.unknown): return .failure(.unknownDevice(token))
            case .failure(.uninstalled):
                return .failure(.invalidRequest("the app was uninstalled: its tokens are dead and get no new one"))
            case .failure(.tooMany(let limit)):
                return .failure(.invalidRequest("this installation has had \(limit) tokens after its first; it gets no more (reinstall it)"))
            }
        }
    }

    /// Tokens one installation may be given after its first: every one stays valid, so they are bounded.
    public static let maximumRefreshedTokens = 100

    /// Forgets one sender's state: the devices registered for it alone (their connections close), its
    /// queued messages, upstream messages and receipts, topic subscriptions and device groups. Devices
    /// shared with other senders stay, without this sender. The sender's credentials and app-server
    /// connections stay. Returns how many devices were removed.
    public func reset(sender: String) async throws(DeviceManagementError) -> Int {
        let count: Int = try await change { s in
            // Restored whole if the store refuses the change (rare: a failing disk); a change made in
            // between by another caller would then be lost from memory, never from the disk.
            let before = s
            let reset = s.core.resetSender(sender)
            let links = s.release(reset.effects)
            s.outbound.forget(sender: sender)
            return .success(Change(value: reset.removed, ops: reset.ops, undo: { s in s = before }, closes: links))
        }
        try? await journal?.removeAll(sender: sender)
        return count
    }

    /// Forgets every device with its queue, tray, device groups and the upstream messages and receipts
    /// waiting for app servers; device connections close. Senders, app-server connections, the clock and the TLS
    /// material stay. Returns how many devices were removed.
    public func reset() async throws(DeviceManagementError) -> Int {
        return try await change { s in
            let reset = s.core.resetDevices()
            let links = s.release(reset.effects)
            let queuedBefore = s.outbound.takeAllQueued()
            s.outbound.forgetInFlight(sender: nil)
            return .success(Change(value: reset.count, ops: reset.ops, undo: { s in
                guard s.registry.devices.isEmpty else { return }
                s.core.undo(reset)
                s.outbound.restore(queuedBefore)
            }, closes: links))
        }
    }

    /// Closes the device's connection (the device goes offline), if it has one.
    @discardableResult
    public func disconnectDevice(token: String) -> Bool {
        guard let link = shard(token).withLock({ $0.link(of: token) }) else { return false }
        link.close()
        return true
    }

    /// The user taps a notification in the tray: it leaves the tray and its payload goes to the app.
    /// A tap claims the entry first, so that two taps of one notification open it once.
    public func tapNotification(token: String, deviceMessageID: String) async throws(DeviceManagementError) -> TrayEntry? {
        guard device(token: token) != nil else { throw .unknownDevice(token) }
        let claim = token + " " + deviceMessageID
        guard withDevice(token, { $0.sessions.claimTap(claim) }) else { return nil }
        defer { withDevice(token) { $0.sessions.endTap(claim) } }
        let entries: [TrayEntry]
        do { entries = try store.tray(token: token) } catch { throw .storeFailure("\(error)") }
        guard let entry = entries.first(where: { $0.deviceMessageID == deviceMessageID }) else { return nil }
        try await commit([.removeFromTray(token: token, deviceMessageID: deviceMessageID)])
        report(.tapped(deviceMessageID: deviceMessageID, token: token))
        return entry
    }
}
