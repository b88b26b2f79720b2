import DequeModule

extension Engine {
    /// The newest `capacity` ids added, each with a value, oldest forgotten first (an id added again
    /// keeps its place).
    struct RecentMap<Value: Sendable>: Sendable {
        let capacity: Int
        private var order = Deque<String>()
        private var values: [String: Value] = [:]

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
}

extension Engine.RecentMap where Value == Void {
    mutating func insert(_ id: String) { insert(id, ()) }
}
