import DeliveryCore
import PushDomain
import StoreModel
import Locking
import MessageJournal

/// Why one token's subscription change was refused; the Instance ID and v1 registration APIs
/// answer each in their own words (docs/http-api.md).
public enum TopicSubscriptionError: Error, Sendable, Equatable {
    /// No such token, or its app was uninstalled.
    case notFound
    /// The token is registered, but not for this sender.
    case senderMismatch
    /// The app instance already has `TopicRegistry.maximumTopicsPerToken` topics.
    case tooManyTopics
    /// Unsubscribing from a topic the token is not subscribed to (without allow_missing).
    case notSubscribed
    /// The store could not take the change: retry.
    case internalError
}

/// One token's subscription change, as the topic-management APIs ask for it.
public struct TopicSubscriptionChange: Sendable, Equatable {
    public var token: String
    public var senderID: String

    public init(token: String, senderID: String) {
        self.token = token
        self.senderID = senderID
    }
}

/// Topics: subscriptions (durable, per app instance and sender) and sends to a topic or condition,
/// fanned out to every subscriber with its own delivery rules.
extension Engine {
    public static var maximumTopicsPerToken: Int { TopicRegistry.maximumTopicsPerToken }

    /// Subscribes each token (as its sender) to `topic`; one result per change, in order, once the
    /// subscriptions are committed. Subscribing twice is a success that keeps the first date.
    public func subscribe(_ changes: [TopicSubscriptionChange], to topic: String) async -> [Result<Void, TopicSubscriptionError>] {
        let now = clock.nowMillis()
        return await changeSubscriptions(changes) { s, change in
            let key = TopicRegistry.Topic(senderID: change.senderID, name: topic)
            if s.topics.topics(token: change.token, senderID: change.senderID)[topic] != nil { return .success(nil) }
            if s.topics.topicCount(token: change.token) >= TopicRegistry.maximumTopicsPerToken { return .failure(.tooManyTopics) }
            s.topics.add(key, token: change.token, at: now)
            return .success(.subscribe([TopicSubscription(senderID: change.senderID, topic: topic, token: change.token, addedAt: now)]))
        } undo: { s, change in
            s.topics.remove(TopicRegistry.Topic(senderID: change.senderID, name: topic), token: change.token)
        }
    }

    /// Unsubscribes each token from `topic`. With `allowMissing`, a token that was not subscribed is
    /// a success (what the v1 registrations API's `allow_missing=true` and Instance ID do).
    public func unsubscribe(_ changes: [TopicSubscriptionChange], from topic: String,
                            allowMissing: Bool = true) async -> [Result<Void, TopicSubscriptionError>] {
        let dates = Locked<[String: Int64]>([:])
        return await changeSubscriptions(changes) { s, change in
            guard let at = s.topics.topics(token: change.token, senderID: change.senderID)[topic] else {
                return allowMissing ? .success(nil) : .failure(.notSubscribed)
            }
            s.topics.remove(TopicRegistry.Topic(senderID: change.senderID, name: topic), token: change.token)
            dates.withLock { $0[change.token] = at }
            return .success(.unsubscribe(senderID: change.senderID, topic: topic, tokens: [change.token]))
        } undo: { s, change in
            if let at = dates.withLock({ $0[change.token] }) {
                s.topics.add(TopicRegistry.Topic(senderID: change.senderID, name: topic), token: change.token, at: at)
            }
        }
    }

    /// Checks every change, applies the valid ones in memory (in every shard, the hub's answers
    /// counting) and submits them in one batch under the locks (so that a send after this call sees
    /// them, and the store gets them in that order); waits for the commit and undoes them in memory
    /// if it fails.
    private func changeSubscriptions(
        _ changes: [TopicSubscriptionChange],
        apply: (inout State, TopicSubscriptionChange) -> Result<StoreOp?, TopicSubscriptionError>,
        undo: @escaping @Sendable (inout State, TopicSubscriptionChange) -> Void
    ) async -> [Result<Void, TopicSubscriptionError>] {
        var planned = SubscriptionPlan(changes: changes)
        let written: Bool = await withCheckedContinuation { continuation in
            withEveryShard { held in
                planned = Self.planSubscriptions(changes, &held[0].pointee, apply)
                for pointer in held.dropFirst() { _ = Self.planSubscriptions(changes, &pointer.pointee, apply) }
                if planned.ops.isEmpty { continuation.resume(returning: true); return }
                committer.submit(planned.ops) { error in continuation.resume(returning: error == nil) }
            }
        }
        if written { return planned.results }
        logger.error("storing topic subscriptions failed")
        everywhere { s in for change in planned.applied { undo(&s, change) } }
        let failed = Set(planned.applied.map(\.token))
        return zip(planned.changes, planned.results).map { change, result in failed.contains(change.token) ? .failure(.internalError) : result }
    }

    /// What a batch of subscription changes did in one shard: each one's answer, the writes, the
    /// changes made (a refreshed token's named by its installation's).
    private struct SubscriptionPlan {
        var changes: [TopicSubscriptionChange]
        var results: [Result<Void, TopicSubscriptionError>]
        var ops: [StoreOp] = []
        var applied: [TopicSubscriptionChange] = []

        init(changes: [TopicSubscriptionChange]) {
            self.changes = changes
            results = .init(repeating: .success(()), count: changes.count)
        }
    }

    private static func planSubscriptions(
        _ changes: [TopicSubscriptionChange], _ s: inout State,
        _ apply: (inout State, TopicSubscriptionChange) -> Result<StoreOp?, TopicSubscriptionError>
    ) -> SubscriptionPlan {
        var plan = SubscriptionPlan(changes: changes)
        for index in changes.indices {
            // A refreshed token subscribes its installation (the subscriptions are the app's).
            guard let device = s.registry.installation(changes[index].token), device.status == .active else {
                plan.results[index] = .failure(.notFound); continue
            }
            plan.changes[index].token = device.token
            let change = plan.changes[index]
            guard device.senders.contains(change.senderID) else { plan.results[index] = .failure(.senderMismatch); continue }
            switch apply(&s, change) {
            case .failure(let error): plan.results[index] = .failure(error)
            case .success(let op?): plan.ops.append(op); plan.applied.append(change)
            case .success(nil): break
            }
        }
        return plan
    }

    /// The token's topics of one sender with the date each was added (ms); nil for an unknown token.
    public func topics(token: String, senderID: String) -> [String: Int64]? {
        state.withLock { s in
            guard let device = s.registry.installation(token) else { return nil }
            return s.topics.topics(token: device.token, senderID: senderID)
        }
    }

    /// Every topic of the sender with its number of subscribers.
    public func topicSubscriberCounts(senderID: String) -> [String: Int] {
        state.withLock { s in
            var counts: [String: Int] = [:]
            for (topic, tokens) in s.topics.subscribers where topic.senderID == senderID { counts[topic.name] = tokens.count }
            return counts
        }
    }

    /// The senders whose server key is `key` (the config file's, or the one recorded in permissive mode).
    public func senders(withServerKey key: String) -> [String] {
        var found = Set(configuration.configuredSenders.filter { $0.value == key }.map(\.key))
        state.withLock { s in for (id, record) in s.registry.senders where record.serverKey == key { found.insert(id) } }
        return found.sorted()
    }

    /// The one sender whose devices are subscribed to any of `topics` now; nil when none or several are.
    public func soleSender(ofTopics topics: [String]) -> String? {
        guard !topics.isEmpty else { return nil }
        let names = Set(topics)
        return state.withLock { s in
            var owner: String?
            for (topic, tokens) in s.topics.subscribers where !tokens.isEmpty && names.contains(topic.name) {
                if let owner, owner != topic.senderID { return nil }
                owner = topic.senderID
            }
            return owner
        }
    }

    /// Permissive mode: a sender first seen through an HTTP API with a server key is provisioned with
    /// that key, as a CCS login would (later legacy topic sends with the key then find it).
    public func provisionSender(_ senderID: String, key: String) {
        guard configuration.authMode == .permissive, Self.isSenderID(senderID), !key.isEmpty else { return }
        recordSender(senderID, key: key)
    }

    // MARK: sends

    /// A message to a topic's subscribers, or to the devices a condition selects, as of now. The core
    /// plans it in one critical section (rate, id, audience, the write), whose write is submitted there.
    func fanOut(_ message: Message, target: Target, senderID: String, completion: @escaping @Sendable ([SendResult]) -> Void) {
        let audience: DeliveryCore.FanOutAudience, from: String
        switch target {
        case .topic(let name):
            guard TopicName.isValid(name) else {
                completion([.refused(.invalidTopic(reason: "topic names match [a-zA-Z0-9-_.~%]{1,\(TopicName.maximumLength)}"))])
                return
            }
            audience = .topic(name)
            from = TopicName.prefix + name
        case .condition(let source):
            do throws(TopicConditionError) {
                audience = .condition(try TopicCondition.parse(source))
            } catch {
                completion([.refused(.invalidTopic(reason: error.reason))])
                return
            }
            // FCM names no topic when a condition matched: the message is from the sender.
            from = senderID
        default:
            preconditionFailure("fanOut is for topics and conditions")
        }
        let now = clock.nowMillis(), nowMicros = clock.nowMicros()
        let (plan, sends) = state.withLock { s -> (DeliveryCore.FanOutPlan, [Send]) in
            let plan = s.core.fanOut(message, to: audience, senderID: senderID, from: from, now: now, nowMicros: nowMicros)
            switch plan {
            case .live(let effects, _, _, _): return (plan, apply(effects, &s))  // the hub's devices; the others' below
            case .write(let fanOut, let queued, let members, let micros):
                committer.submit(.fanOut(fanOut)) { [self] error in
                    if let error {
                        logger.error("fan-out failed", metadata: ["error": "\(error)"])
                        completion([.refused(.unavailable)])
                        return
                    }
                    report(.fannedOut(queued, topic: from == senderID ? nil : from, devices: members.count))
                    handOverFannedOut(queued, members: members, in: shards[...])
                    completion([.fannedOut(messageID: micros)])
                }
                return (plan, [])
            case .overRate, .dryRun: return (plan, [])
            }
        }
        switch plan {
        case .write: break // the commit answers
        case .overRate(let topic, let wait):
            completion([.refused(.topicsMessageRateExceeded(topic: topic, retryAfterMillis: wait))])
        case .dryRun(let micros): completion([.fannedOut(messageID: micros)])
        case .live(_, let queued, let members, let micros):
            perform(sends)
            // A time to live of 0: the other shards' members connected now get it, nothing is stored.
            handOverFannedOut(queued, members: members, in: shards.dropFirst())
            completion([.fannedOut(messageID: micros)])
        }
    }

    /// After the commit: the members connected here get it now, shard by shard.
    private func handOverFannedOut(_ queued: QueuedMessage, members: Set<String>, in shards: ArraySlice<Shard>) {
        let now = clock.nowMillis()
        for shard in shards {
            perform(shard.withLock { s in apply(s.core.fannedOut(queued, members: members, now: now), &s) })
        }
    }
}
