import PushDomain
import StoreModel

/// A message to a topic's subscribers, or to the devices a condition selects, in the core: one event
/// that counts it against the topic rate, mints its id, chooses its audience as of now and says what
/// to write; the commit's result hands it to the members connected here (`fannedOut`).
extension DeliveryCore {
    package enum FanOutAudience: Sendable {
        case topic(String)
        case condition(TopicCondition)
    }

    package enum FanOutPlan {
        /// The sender's rate for the topic (or one the condition names) is spent.
        case overRate(topic: String, retryAfterMillis: Int64)
        /// Checked and counted nothing: the answer names the message id.
        case dryRun(micros: Int64)
        /// A time to live of 0: the members that take it now get it, nothing is stored. `message` and
        /// `members` for a host whose other cores hold some of the members (`fannedOut` there).
        case live([DeviceEffect], message: QueuedMessage, members: Set<String>, micros: Int64)
        /// Write it; once committed, `fannedOut` hands it to the members connected here.
        case write(FanOut, message: QueuedMessage, members: Set<String>, micros: Int64)
    }

    /// `from`: what the devices see as the sender (`/topics/T`, or the sender for a condition).
    package mutating func fanOut(_ message: Message, to audience: FanOutAudience, senderID: String, from: String,
                                 now: Int64, nowMicros: Int64) -> FanOutPlan {
        if !message.dryRun, topicRates != nil {
            // A sender's messages to a topic are counted per topic; a condition's count against each
            // topic it names, all or none (a dry run goes nowhere and counts nothing).
            let topics: [String], named: String
            switch audience {
            case .topic(let name): (topics, named) = ([name], name)
            case .condition(let condition): (topics, named) = (condition.topics, condition.source)
            }
            if let wait = topicRates!.admit(topics.map { senderID + "/" + $0 }, now: now) {
                return .overRate(topic: named, retryAfterMillis: wait)
            }
        }
        let micros = nextMicros(now: nowMicros)
        if message.dryRun { return .dryRun(micros: micros) }
        // The audience as of now: the store reads a topic's subscribers in the same order of writes;
        // a condition's matches are chosen here.
        let members: Set<String>, stored: FanOut.Audience
        switch audience {
        case .topic(let name):
            members = topics.subscribers(of: .init(senderID: senderID, name: name))
            stored = .subscribers(senderID: senderID, topic: name)
        case .condition(let condition):
            members = Set(topics.matches(condition, senderID: senderID) {
                registry.devices.values.filter { $0.status == .active && $0.senders.contains(senderID) }.map(\.token)
            })
            stored = .tokens(Array(members))
        }
        let deviceMessageID = DeviceMessageID.make(micros: micros, senderHash: DeviceMessageID.senderHash(senderID))
        let queued = Self.queuedMessage(message, token: "", app: "", senderID: senderID, from: from,
                                        deviceMessageID: deviceMessageID, now: now)
        if message.timeToLive == 0 {
            var effects: [DeviceEffect] = []
            for token in members where sessions.online[token]?.loaded == true {
                effects += take([copy(of: queued, for: token)], token: token, now: now)
            }
            return .live(effects, message: queued, members: members, micros: micros)
        }
        let fanOut = FanOut(audience: stored, message: queued,
                            limits: storageLimits(token: "", senderID: senderID, now: now),
                            collapseKeyIsApp: message.collapseKey == nil && message.isNotification)
        return .write(fanOut, message: queued, members: members, micros: micros)
    }

    /// After the fan-out's commit: the members online with their backlog loaded get it now (those
    /// loading read it from the store; the rest get it when they connect).
    package mutating func fannedOut(_ queued: QueuedMessage, members: Set<String>, now: Int64) -> [DeviceEffect] {
        let ready = sessions.online.filter { $0.value.loaded && members.contains($0.key) }.map(\.key)
        var effects: [DeviceEffect] = []
        for token in ready { effects += take([copy(of: queued, for: token)], token: token, now: now) }
        return effects
    }

    /// The audience's shared message as one device holds it: its token, and for a notification
    /// without a collapse key its app as the key (as the store writes it).
    private func copy(of queued: QueuedMessage, for token: String) -> QueuedMessage {
        var copy = queued
        copy.token = token
        if queued.collapseKey == nil, queued.isNotification { copy.collapseKey = registry.devices[token]?.app }
        return copy
    }
}
