import StoreModel
import DequeModule

extension Engine {
    /// The newest `capacity` ids added, each with a value, oldest forgotten first (an id added again
    /// keeps its place).
    struct RecentMap<Value: Sendable>: Sendable {
        let capacity: Int
        private var order = Deque<String>()
        fileprivate var values: [String: Value] = [:]

        init(capacity: Int) { self.capacity = capacity }

        func contains(_ id: String) -> Bool { values[id] != nil }

        mutating func insert(_ id: String, _ value: Value) {
            guard values.updateValue(value, forKey: id) == nil else { return }
            order.append(id)
            if order.count > capacity, let oldest = order.popFirst() { values[oldest] = nil }
        }

        /// The value of `id` if it is here; it is forgotten.
        mutating func take(_ id: String) -> Value? { values.removeValue(forKey: id) }
    }

    /// Ids alone.
    typealias RecentIDs = RecentMap<Void>

    /// Which message an id was given to: a different message under the same id (minted again by a
    /// node that restarted into the same slot on a virtual clock) is not the one confirmed, and must
    /// not be skipped or removed as if it were (issue 39).
    struct MessageIdentity: Sendable, Equatable {
        let senderID: String
        let appMessageID: String

        init(_ m: QueuedMessage) {
            senderID = m.senderID
            appMessageID = m.appMessageID
        }
    }
}

extension Engine.RecentMap where Value: Equatable {
    /// Whether `id` is here for this value (the same message, not just the same id).
    func contains(_ id: String, _ value: Value) -> Bool { values[id] == value }
}

extension Engine.RecentMap where Value == Void {
    mutating func insert(_ id: String) { insert(id, ()) }
}
