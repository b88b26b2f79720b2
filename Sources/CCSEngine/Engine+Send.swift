import DeliveryCore
import PushDomain
import FaultInjection
import StoreModel
import PlatformRendering
import Locking

/// Downstream messages: the one entry every front end calls, the checks, and hand-over or storage.
extension Engine {
    /// The one entry for downstream messages, whichever API they came in through. `completion` runs
    /// exactly once, with one result per token of the target (in its order), or one `.group` result
    /// for a device group; an acceptance only after the message is committed or delivered (or
    /// deliberately not stored: dry run, TTL 0).
    public func send(_ request: SendRequest, completion given: @escaping @Sendable ([SendResult]) -> Void) {
        let answer: @Sendable ([SendResult]) -> Void
        if !observers.isEmpty {
            let start = ContinuousClock.now
            answer = { [self] results in
                let took = ContinuousClock.now - start
                report(.sendTook(request.origin.api,
                                 nanoseconds: took.components.seconds * 1_000_000_000 + took.components.attoseconds / 1_000_000_000))
                given(results)
            }
        } else {
            answer = given
        }
        let completion: @Sendable ([SendResult]) -> Void
        if faults.isActive(.accepted) {
            completion = { [self] results in
                answer(results)
                applyAcceptedFaults(sender: request.sender, results: results)
            }
        } else {
            completion = answer
        }
        switch request.target {
        case .token(let token) where NotificationKey.groupID(of: token) != nil:
            // A notification key and a token share `to`; only a string of the key's form is a key
            // (it never is a token: keys have no instance-id part), and then it is one of this
            // sender's groups or found nowhere.
            sendToGroup(request.message, key: token, senderID: request.sender, completion: completion)
        case .token(let token):
            send(request.message, to: token, senderID: request.sender) { completion([$0]) }
        case .tokens(let tokens):
            let gathered = ResultsInOrder(count: tokens.count, completion: completion)
            for (index, token) in tokens.enumerated() {
                send(request.message, to: token, senderID: request.sender) { gathered.set(index, $0) }
            }
        case .topic, .condition:
            fanOut(request.message, target: request.target, senderID: request.sender, completion: completion)
        case .group(let key):
            sendToGroup(request.message, key: key, senderID: request.sender, completion: completion)
        case .apnsDeviceToken(let deviceToken):
            sendAPNs(request.message, deviceToken: deviceToken, bundleID: request.sender, completion: completion)
        }
    }

    /// Who a message comes from: an FCM sender, or an APNs provider (the sender is then the bundle id,
    /// already checked against the registration by `sendAPNs`).
    enum Origin {
        case fcm
        case apns(deviceToken: String)
    }

    /// One message to one token: an installation's first token or one it was given later (then the
    /// answer names the newest, the canonical registration id).
    func send(_ message: Message, to given: String, senderID: String, origin: Origin = .fcm,
              completion answered: @escaping @Sendable (SendResult) -> Void) {
        let now = clock.nowMillis()
        let lookup = state.withLock { s in lookUp(message, given: given, senderID: senderID, origin: origin, now: now, &s) }
        let app: String, platform: Platform, deviceMessageID: String, deviceState: DeviceState, online: Bool
        let to: String, canonical: String?
        switch lookup {
        case .refused(let error): answered(.refused(error)); return
        case .found(let a, let p, let id, let st, let o, let installation, let c):
            (app, platform, deviceMessageID, deviceState, online, to, canonical) = (a, p, id, st, o, installation, c)
        }
        // Inside, the message is the installation's (`to`); the answer speaks of the token it was sent to.
        let completion: @Sendable (SendResult) -> Void
        if to == given && canonical == nil {
            completion = answered
        } else {
            completion = { result in
                guard case .accepted(_, let id, _) = result else { return answered(result) }
                answered(.accepted(token: given, deviceMessageID: id, canonicalToken: canonical))
            }
        }
        let queued: QueuedMessage
        switch origin {
        case .fcm:
            queued = Self.queuedMessage(message, token: to, app: app, senderID: senderID,
                                        deviceMessageID: deviceMessageID, now: now)
        case .apns(let deviceToken):
            queued = Self.apnsQueuedMessage(message, token: to, bundleID: senderID, deviceToken: deviceToken,
                                            deviceMessageID: deviceMessageID, now: now)
        }
        // The gateway checks an APNs notification's own limit; FCM's translation is for FCM messages.
        if platform == .ios, case .fcm = origin {
            // What APNs would get after FCM's translation must fit APNs's limit (a dry run too).
            let apns = APNsNotification.translate(DeliveredMessage(
                payloadJSON: queued.payload, platformBlocksJSON: queued.platformBlocks, acceptedAtMillis: now, app: app,
                appInBackground: false))
            if !apns.fitsAPNs {
                completion(.refused(.messageTooBig(token: to, bytes: apns.payloadBytes)))
                return
            }
        }
        if message.dryRun {
            completion(.accepted(token: to, deviceMessageID: nil))
            return
        }
        let deliverableNow = online && deviceState.admits(queued, platform: platform)
        // A device on another node: offered there (a time to live of 0 too: "now" is the device's node's).
        if !online, case .fcm = origin, let cluster, let node = cluster.node(holding: to),
           Self.mayOffer(queued, deviceState: deviceState, platform: platform) {
            offer(queued, to: node, cluster: cluster, completion: completion)
            return
        }
        if message.timeToLive == 0 && !deliverableNow {
            // "Now or never": the device cannot take it now, so it is dropped, never stored.
            completion(.accepted(token: to, deviceMessageID: nil))
            return
        }
        let early = deliverableNow ? EarlyWrite(ticket: WriteTicket(), settle: completion) : nil
        let limits = deliverableNow ? nil : storageLimits(token: to, senderID: senderID, now: now)
        let plan = state.withLock { s in
            submit(queued, of: message, to: to, early: early, limits: limits, senderID: senderID, now: now, completion: completion, &s)
        }
        switch plan {
        case .live(let sends): perform(sends)
        case .stored: break
        case .dropped: completion(.accepted(token: to, deviceMessageID: nil))
        case .unregistered: completion(.refused(.unregistered(token: to)))
        }
    }

    /// Under the lock: the installation a token names and what the send needs of it, or why FCM
    /// refuses the message (the checks in FCM's order; the per-device rate counts client errors too).
    private func lookUp(_ message: Message, given: String, senderID: String, origin: Origin, now: Int64,
                        _ s: inout State) -> Lookup {
        guard let device = s.registry.installation(given) else { return .refused(.invalidRegistration(token: given)) }
        let to = device.token
        if device.status != .active { return .refused(.unregistered(token: given)) }
        if case .fcm = origin, !device.senders.contains(senderID) {
            return .refused(.senderMismatch(token: to, sender: senderID))
        }
        if let package = message.restrictedPackageName, package != device.app {
            return .refused(.packageMismatch(token: to, package: package))
        }
        // FCM's per-device limit counts what app servers send (a dry run goes nowhere; APNs has
        // no such answer). Counted before the later checks, as FCM counts client errors too.
        if case .fcm = origin, !message.dryRun, s.deviceRates != nil,
           let wait = s.deviceRates!.admit(to, now: now) {
            return .refused(.deviceMessageRateExceeded(token: to, retryAfterMillis: wait))
        }
        let id = DeviceMessageID.make(micros: nextMicros(&s), senderHash: DeviceMessageID.senderHash(senderID))
        let deviceState = s.registry.deviceStates[to] ?? DeviceState()
        let takesNow = s.sessions.online[to]?.loaded == true
        let canonical = device.refreshedTokens.last.flatMap { $0 == given ? nil : $0 }
        // Only what the rest needs leaves the lock: a whole record would be a dozen retains per message.
        return .found(app: device.app, platform: device.platform, id, deviceState, takesNow,
                      installation: to, canonical: canonical)
    }

    /// Under the lock: the write of one message, and its hand-over when its device can take it now.
    /// The installation check and the write's submission share this critical section: an uninstall
    /// (which marks the device and submits its queue's removal under this lock) comes either before
    /// (NACK) or after (its removal follows this write), never between.
    private func submit(_ queued: QueuedMessage, of message: Message, to: String, early: EarlyWrite?, limits: QueueLimits?, senderID: String,
                        now: Int64, completion: @escaping @Sendable (SendResult) -> Void, _ s: inout State) -> DownstreamPlan {
        guard s.registry.devices[to]?.status == .active else { return .unregistered }
        if let early, s.sessions.online[to]?.loaded == true {
            // The device can take it now: hand it over at once and write it in the background. If
            // the device confirms it before the writer gets to it, the write is called off and the
            // ACK follows the confirmation; otherwise the ACK follows the commit, as for every message.
            let id = s.keep(early)
            let sends = take([queued], token: to, early: id, &s)
            if sends.isEmpty {
                _ = s.forget(id)
            } else {
                // The collapse is not called off with the write: an older message with this key
                // held back (Doze) must go even when this one never reaches the disk.
                if let key = queued.collapseKey, needsCollapse(queued, token: to, s) {
                    committer.submit(.collapse(token: to, collapseKey: key))
                }
                committer.submit([.enqueue(queued, limits: nil)], ticket: early.ticket) { [self] error in
                    if error == nil { journal(.stored, queued) }
                    completion(outcome(storing: queued, error: error))
                }
                return .live(sends)
            }
            // It went offline (or to sleep) in between, or its window is full (or holds messages
            // back in the store): store it like any other message, behind those.
            if message.timeToLive == 0 { return .dropped }
        }
        if queued.kind == .apnsNotification { s.sessions.modify(to) { $0.storedAPNsNotification() } }
        var stored = limits ?? storageLimits(token: to, senderID: senderID, now: now)
        // The 100-message limit is on what waits, not on what the device's connection holds: a
        // connected device whose window is full would otherwise lose its messages as soon as
        // one more came (the rows of its window count in the store).
        if queued.collapseKey == nil { stored.maxNonCollapsible += s.sessions.online[to]?.heldNonCollapsible ?? 0 }
        committer.submit(.enqueue(queued, limits: stored)) { [self] error in
            if error == nil {
                journal(.stored, queued)
                handOver([queued], to: to)
            }
            completion(outcome(storing: queued, error: error))
        }
        return .stored
    }

    /// Whether a message handed over live must still collapse older ones in the store. Always, but for
    /// Apple's store-and-forward key of a single node's connected device that is known to hold no
    /// other APNs notification: none was in its queue when it connected, none was stored since, and
    /// every other one on the connection was confirmed before its write (a written one, or one whose
    /// write may still be taken, is in flight until confirmed, and its own removal follows it then).
    /// Every notification of a device streaming them submitted a collapse that found nothing: the
    /// writer's largest work on the APNs path (docs/benchmarks.md).
    func needsCollapse(_ m: QueuedMessage, token: String, _ s: State) -> Bool {
        guard m.kind == .apnsNotification, m.collapseKey == Self.apnsStoreAndForwardKey, cluster == nil,
              let online = s.sessions.online[token], online.apnsStored == .holdsNone else { return true }
        for (id, other) in online.inFlight where id != m.deviceMessageID && other.message.kind == .apnsNotification {
            guard let early = s.earlyWrite(other.early), early.ticket.isCancelled else { return true }
        }
        return false
    }

    /// Whether a message for a device on another node may go there before it is written: one the app
    /// takes now and whose confirmation is all there is to it. A notification bound for the tray and a
    /// message with a receipt are removed together with their tray entry or receipt, in one commit on
    /// the device's node, so they go the durable way.
    static func mayOffer(_ m: QueuedMessage, deviceState: DeviceState, platform: Platform) -> Bool {
        m.kind == .message && !m.deliveryReceiptRequested && !(m.isNotification && !deviceState.foreground)
            && deviceState.admits(m, platform: platform)
    }

    /// The message goes to the device's node at once and its write waits, as for a device connected
    /// here: the device's confirmation, coming back in time, calls the write off and answers the
    /// sender; otherwise the answer follows the commit, and the commit is announced to the device's
    /// node as usual (docs/scaling.md).
    private func offer(_ queued: QueuedMessage, to node: String, cluster: any ClusterCoordinator,
                       completion: @escaping @Sendable (SendResult) -> Void) {
        let early = EarlyWrite(ticket: WriteTicket(), settle: completion)
        let limits = storageLimits(token: queued.token, senderID: queued.senderID, now: queued.enqueuedAt)
        let id = queued.deviceMessageID
        // Under the lock for the same reason as below: an uninstall comes before or after, not between.
        let submitted = state.withLock { s -> Bool in
            guard s.registry.devices[queued.token]?.status == .active else { return false }
            s.sessions.offer(Offered(message: queued, early: s.keep(early)), id: id)
            if let key = queued.collapseKey { committer.submit(.collapse(token: queued.token, collapseKey: key)) }
            committer.submit([.enqueue(queued, limits: limits)], ticket: early.ticket) { [self] error in
                // Written: a confirmation that came meanwhile, or comes later, removes it (the device
                // has it), after this commit in the writer's order.
                let confirmed = state.withLock { s -> Bool in
                    guard let offer = s.sessions.offerWritten(id, token: queued.token, succeeded: error == nil) else { return false }
                    _ = s.forget(offer.early)
                    return offer.confirmed
                }
                if confirmed && error == nil { committer.submit(.removeMessage(token: queued.token, deviceMessageID: id)) }
                if error == nil { journal(.stored, queued) }
                completion(outcome(storing: queued, error: error))
            }
            return true
        }
        guard submitted else { return completion(.refused(.unregistered(token: queued.token))) }
        cluster.offerLive(queued, to: node)
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
        return .refused(.unavailable)
    }

    private enum Lookup {
        case refused(SendError)
        case found(app: String, platform: Platform, String, DeviceState, Bool, installation: String, canonical: String?)
    }
}

/// Results for a multicast, handed over in the request's order once every token has its answer.
final class ResultsInOrder: Sendable {
    private let state: Locked<(results: [SendResult?], missing: Int)>
    private let completion: @Sendable ([SendResult]) -> Void

    init(count: Int, completion: @escaping @Sendable ([SendResult]) -> Void) {
        state = Locked((Array(repeating: nil, count: count), count))
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
