import StoreModel
import DequeModule

/// The newest `capacity` ids added, each with a value, oldest forgotten first (an id added again
/// keeps its place).
package struct RecentMap<Value: Sendable>: Sendable {
    package let capacity: Int
    private var order = Deque<String>()
    fileprivate var values: [String: Value] = [:]

    package init(capacity: Int) { self.capacity = capacity }

    package func contains(_ id: String) -> Bool { values[id] != nil }

    package mutating func insert(_ id: String, _ value: Value) {
        guard values.updateValue(value, forKey: id) == nil else { return }
        order.append(id)
        if order.count > capacity, let oldest = order.popFirst() { values[oldest] = nil }
    }

    /// The value of `id` if it is here; it is forgotten.
    package mutating func take(_ id: String) -> Value? { values.removeValue(forKey: id) }
}

/// Ids alone.
package typealias RecentIDs = RecentMap<Void>

/// Which message an id was given to: a different message under the same id (minted again by a
/// node that restarted into the same slot on a virtual clock) is not the one confirmed, and must
/// not be skipped or removed as if it were (issue 39).
package struct MessageIdentity: Sendable, Equatable {
    package let senderID: String
    package let appMessageID: String

    package init(_ m: QueuedMessage) {
        senderID = m.senderID
        appMessageID = m.appMessageID
    }
}

extension RecentMap where Value: Equatable {
    /// Whether `id` is here for this value (the same message, not just the same id).
    package func contains(_ id: String, _ value: Value) -> Bool { values[id] == value }
}

extension RecentMap where Value == Void {
    package mutating func insert(_ id: String) { insert(id, ()) }
}
