import PushDomain

/// The rules in force and where each one stands: a value type, so that deciding is a pure function
/// of the rules and the traffic seen so far (the same traffic gets the same faults).
public struct FaultPlan: Sendable {
    struct Entry: Sendable {
        var rule: FaultRule
        /// Matching messages seen, and faults applied.
        var matched = 0
        var fired = 0
        var random: SplitMix64

        init(rule: FaultRule) {
            self.rule = rule
            self.random = SplitMix64(seed: rule.seed)
        }
    }

    private(set) var entries: [Entry] = []

    public init(rules: [FaultRule] = []) {
        entries = rules.map(Entry.init)
    }

    public var rules: [FaultRule] { entries.map(\.rule) }

    /// Adds a rule, or replaces the one with the same id (its counters start again).
    public mutating func put(_ rule: FaultRule) {
        if let i = entries.firstIndex(where: { $0.rule.id == rule.id }) {
            entries[i] = Entry(rule: rule)
        } else {
            entries.append(Entry(rule: rule))
        }
    }

    @discardableResult
    public mutating func remove(id: String) -> Bool {
        guard let i = entries.firstIndex(where: { $0.rule.id == id }) else { return false }
        entries.remove(at: i)
        return true
    }

    public mutating func removeAll() { entries.removeAll() }

    /// The points that have at least one rule (front ends skip the lock when theirs has none).
    public var points: Set<FaultPoint> { Set(entries.map(\.rule.action.point)) }

    /// The rules that fire for this message at this point, in the order they were added. Each
    /// matching rule counts the message whether or not it fires.
    public mutating func decide(_ point: FaultPoint, _ subject: FaultSubject) -> [FaultRule] {
        var fired: [FaultRule] = []
        for i in entries.indices where entries[i].rule.action.point == point && entries[i].rule.scope.matches(subject) {
            entries[i].matched += 1
            let rule = entries[i].rule
            guard entries[i].matched > rule.after else { continue }
            if let times = rule.times, entries[i].fired >= times { continue }
            if rule.probability < 1, entries[i].random.nextUnit() >= rule.probability { continue }
            entries[i].fired += 1
            fired.append(rule)
        }
        return fired
    }

    /// A rule with its counters, for the admin API.
    public func status(of id: String) -> (rule: FaultRule, matched: Int, fired: Int)? {
        entries.first { $0.rule.id == id }.map { ($0.rule, $0.matched, $0.fired) }
    }

    public var statuses: [(rule: FaultRule, matched: Int, fired: Int)] {
        entries.map { ($0.rule, $0.matched, $0.fired) }
    }
}
