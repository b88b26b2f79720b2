import PushDomain

/// Who is subscribed to which topic, per sender: the engine's memory of the `topic_subscription`
/// table, so that a send finds its audience and a subscription its limit without a store read.
package struct TopicRegistry {
    package init() {}

    package struct Topic: Hashable {
        package var senderID: String
        package var name: String

        package init(senderID: String, name: String) {
            self.senderID = senderID
            self.name = name
        }
    }

    /// FCM's limit of topics per app instance.
    package static let maximumTopicsPerToken = 2000

    package private(set) var subscribers: [Topic: Set<String>] = [:]
    /// token → its topics with the time each was added (ms).
    package private(set) var topicsByToken: [String: [Topic: Int64]] = [:]

    /// Adds the subscription; false when it was there already (it keeps its date).
    @discardableResult
    package mutating func add(_ topic: Topic, token: String, at: Int64) -> Bool {
        if topicsByToken[token]?[topic] != nil { return false }
        topicsByToken[token, default: [:]][topic] = at
        subscribers[topic, default: []].insert(token)
        return true
    }

    /// Removes the subscription; false when there was none.
    @discardableResult
    package mutating func remove(_ topic: Topic, token: String) -> Bool {
        guard topicsByToken[token]?.removeValue(forKey: topic) != nil else { return false }
        if topicsByToken[token]?.isEmpty == true { topicsByToken[token] = nil }
        subscribers[topic]?.remove(token)
        if subscribers[topic]?.isEmpty == true { subscribers[topic] = nil }
        return true
    }

    /// Every subscription of the token (its app was uninstalled); returns what was removed.
    @discardableResult
    package mutating func removeAll(token: String) -> [Topic: Int64] {
        guard let topics = topicsByToken.removeValue(forKey: token) else { return [:] }
        for topic in topics.keys {
            subscribers[topic]?.remove(token)
            if subscribers[topic]?.isEmpty == true { subscribers[topic] = nil }
        }
        return topics
    }

    package func topicCount(token: String) -> Int { topicsByToken[token]?.count ?? 0 }

    /// The token's topics of one sender, with their dates.
    package func topics(token: String, senderID: String) -> [String: Int64] {
        var result: [String: Int64] = [:]
        for (topic, at) in topicsByToken[token] ?? [:] where topic.senderID == senderID { result[topic.name] = at }
        return result
    }

    package func subscribers(of topic: Topic) -> Set<String> { subscribers[topic] ?? [] }

    /// The tokens a condition selects among `universe` (every active device of the sender), as of
    /// now. When the condition holds for a device with none of its topics (`!('a' in topics)`), every
    /// device of the sender is a candidate; otherwise only the subscribers of its topics are.
    package func matches(_ condition: TopicCondition, senderID: String, universe: () -> [String]) -> [String] {
        let candidates: Set<String>
        if condition.evaluate(subscribedTopics: []) {
            candidates = Set(universe())
        } else {
            var union = Set<String>()
            for name in condition.topics { union.formUnion(subscribers(of: Topic(senderID: senderID, name: name))) }
            candidates = union
        }
        var result: [String] = []
        for token in candidates {
            let names = Set(condition.topics.filter { topicsByToken[token]?[Topic(senderID: senderID, name: $0)] != nil })
            if condition.evaluate(subscribedTopics: names) { result.append(token) }
        }
        return result
    }
}
