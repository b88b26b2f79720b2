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
        let completion = answering(request, given)
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

    /// The request's answer, with what follows it in one place: how long the request took (for the
    /// observers, only when there are any) and the fault rules that act on an accepted message (only
    /// when one does). Nothing is wrapped when neither is on.
    private func answering(_ request: SendRequest, _ given: @escaping @Sendable ([SendResult]) -> Void)
        -> @Sendable ([SendResult]) -> Void {
        let start: ContinuousClock.Instant? = observers.isEmpty ? nil : .now
        let faulted = faults.isActive(.accepted)
        guard start != nil || faulted else { return given }
        return { [self] results in
            if let start {
                let took = ContinuousClock.now - start
                report(.sendTook(request.origin.api,
                                 nanoseconds: took.components.seconds * 1_000_000_000 + took.components.attoseconds / 1_000_000_000))
            }
            given(results)
            if faulted { applyAcceptedFaults(sender: request.sender, results: results) }
        }
    }

    typealias Origin = DeliveryCore.Origin

    /// One message to one token: an installation's first token or one it was given later (then the
    /// answer names the newest, the canonical registration id). The core looks it up and decides;
    /// the stored message is built between its two events, outside the lock.
    func send(_ message: Message, to given: String, senderID: String, origin: Origin = .fcm,
              completion answered: @escaping @Sendable (SendResult) -> Void) {
        let now = clock.nowMillis(), micros = clock.nowMicros()
        let lookup = withDevice(given) { s in
            s.core.lookUp(message, given: given, senderID: senderID, origin: origin, now: now, nowMicros: micros)
        }
        let found: DeliveryCore.Recipient
        switch lookup {
        case .failure(let error): return answered(.refused(error))
        case .success(let recipient): found = recipient
        }
        let to = found.installation
        // Inside, the message is the installation's (`to`); the answer speaks of the token it was sent to.
        let completion: @Sendable (SendResult) -> Void
        if to == given && found.canonical == nil {
            completion = answered
        } else {
            completion = { [canonical = found.canonical] result in
                guard case .accepted(_, let id, _) = result else { return answered(result) }
                answered(.accepted(token: given, deviceMessageID: id, canonicalToken: canonical))
            }
        }
        let queued: QueuedMessage
        switch origin {
        case .fcm:
            queued = DeliveryCore.queuedMessage(message, token: to, app: found.app, senderID: senderID,
                                        deviceMessageID: found.deviceMessageID, now: now)
        case .apns(let deviceToken):
            queued = Self.apnsQueuedMessage(message, token: to, bundleID: senderID, deviceToken: deviceToken,
                                            deviceMessageID: found.deviceMessageID, now: now)
        }
        if let refusal = Self.refusal(of: queued, platform: found.platform, app: found.app, origin: origin, now: now) {
            return completion(.refused(refusal))
        }
        if message.dryRun { return completion(.accepted(token: to, deviceMessageID: nil)) }
        let deliverableNow = found.takesNow && found.deviceState.admits(queued, platform: found.platform)
        // A device on another node: offered there (a time to live of 0 too: "now" is the device's node's).
        if !found.takesNow, case .fcm = origin, let cluster, let node = cluster.node(holding: to),
           DeliveryCore.mayOffer(queued, deviceState: found.deviceState, platform: found.platform) {
            return offer(queued, to: node, cluster: cluster, completion: completion)
        }
        if message.timeToLive == 0 && !deliverableNow {
            // "Now or never": the device cannot take it now, so it is dropped, never stored.
            return completion(.accepted(token: to, deviceMessageID: nil))
        }
        let early = deliverableNow ? EarlyWrite(ticket: WriteTicket(), settle: completion) : nil
        submit(queued, early: early, now: now, completion: completion)
    }

    /// Why FCM refuses a message for an iOS device after building it: what APNs would get after FCM's
    /// translation must fit APNs's limit (a dry run too). The gateway checks an APNs notification's own.
    private static func refusal(of queued: QueuedMessage, platform: Platform, app: String, origin: Origin, now: Int64) -> SendError? {
        guard platform == .ios, case .fcm = origin else { return nil }
        let apns = APNsNotification.translate(DeliveredMessage(
            payloadJSON: queued.payload, platformBlocksJSON: queued.platformBlocks, acceptedAtMillis: now, app: app,
            appInBackground: false))
        return apns.fitsAPNs ? nil : .messageTooBig(token: queued.token, bytes: apns.payloadBytes)
    }

    /// The core's second event for one message, and its effects: the writes are submitted in the
    /// critical section (their order is the core's), the hand-over and the answers outside it.
    private func submit(_ queued: QueuedMessage, early: EarlyWrite?, now: Int64,
                        completion: @escaping @Sendable (SendResult) -> Void) {
        let to = queued.token
        // Built outside the lock: the stored limits' notice is a rendering of its own.
        let limits = early == nil ? DeliveryCore.storageLimits(coreSettings, token: to, senderID: queued.senderID, now: now) : nil
        let plan = shard(to).withLock { s -> Plan in
            let id = early.map { s.keep($0) }
            let submission = s.core.submit(queued, early: id, limits: limits, now: now)
            if case .live = submission {} else { _ = s.forget(id) }
            switch submission {
            case .live(let handOver, let collapse, let write):
                let sends = apply(handOver, &s)
                if let collapse { committer.submit(collapse) }
                committer.submit([write], ticket: early!.ticket) { [self] error in
                    if error == nil { journal(.stored, queued) }
                    completion(outcome(storing: queued, error: error))
                }
                return .live(sends)
            case .stored(let write, let effects):
                _ = apply(effects, &s)
                committer.submit(write) { [self] error in
                    if error == nil {
                        journal(.stored, queued)
                        handOver([queued], to: to)
                    }
                    completion(outcome(storing: queued, error: error))
                }
                return .stored
            case .dropped(let effects):
                _ = apply(effects, &s)
                return .dropped
            case .unregistered: return .unregistered
            }
        }
        switch plan {
        case .live(let sends): perform(sends)
        case .stored: break
        case .dropped: completion(.accepted(token: to, deviceMessageID: nil))
        case .unregistered: completion(.refused(.unregistered(token: to)))
        }
    }

    /// The message goes to the device's node at once and its write waits, as for a device connected
    /// here: the device's confirmation, coming back in time, calls the write off and answers the
    /// sender; otherwise the answer follows the commit, and the commit is announced to the device's
    /// node as usual (docs/scaling.md).
    private func offer(_ queued: QueuedMessage, to node: String, cluster: any ClusterCoordinator,
                       completion: @escaping @Sendable (SendResult) -> Void) {
        let early = EarlyWrite(ticket: WriteTicket(), settle: completion)
        let id = queued.deviceMessageID
        // Under the lock for the same reason as `submit`: an uninstall comes before or after, not between.
        let submitted = shard(queued.token).withLock { s -> Bool in
            guard s.registry.devices[queued.token]?.status == .active else { return false }
            let limits = s.core.storageLimits(token: queued.token, senderID: queued.senderID, now: queued.enqueuedAt)
            s.sessions.offer(Offered(message: queued, early: s.keep(early)), id: id)
            if let key = queued.collapseKey { committer.submit(.collapse(token: queued.token, collapseKey: key)) }
            committer.submit([.enqueue(queued, limits: limits)], ticket: early.ticket) { [self] error in
                // Written: a confirmation that came meanwhile, or comes later, removes it (the device
                // has it), after this commit in the writer's order.
                let confirmed = shard(queued.token).withLock { s -> Bool in
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

    private enum Plan {
        case live([Send])
        case stored
        case dropped
        case unregistered
    }

    /// The answer once the message's write has committed (accepted) or failed (internal error).
    private func outcome(storing queued: QueuedMessage, error: Error?) -> SendResult {
        guard let error else { return .accepted(token: queued.token, deviceMessageID: queued.deviceMessageID) }
        logger.error("enqueue failed", metadata: ["error": "\(error)"])
        return .refused(.unavailable)
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
