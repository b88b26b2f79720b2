import PushDomain
import Locking
import Synchronization

/// One fault applied, with what triggered it.
public struct FaultLogEntry: Sendable, Equatable {
    public var at: Int64
    public var ruleID: String
    public var action: String
    public var subject: FaultSubject

    public var json: JSONValue {
        var o: [String: JSONValue] = ["at": .int(at), "rule": .string(ruleID), "action": .string(action),
                                      "origin": .string(subject.origin)]
        if let s = subject.sender { o["sender"] = .string(s) }
        if let s = subject.token { o["token"] = .string(s) }
        if let s = subject.topic { o["topic"] = .string(s) }
        if let s = subject.messageID { o["message_id"] = .string(s) }
        return .object(o)
    }
}

/// The fault rules in force, shared by every front end. Thread-safe; a point with no rule costs one
/// atomic load, so traffic without faults does not take the lock.
public final class FaultInjector: Sendable {
    struct State {
        var plan = FaultPlan()
        /// Newest last; bounded by `logCapacity`.
        var log: [FaultLogEntry] = []
        var logStart = 0
        var nextID = 1
    }

    let state = Locked(State())
    /// Bit n set: some rule acts at `FaultPoint.allCases[n]`.
    let activePoints = Atomic<UInt8>(0)
    let now: @Sendable () -> Int64
    let onFault: @Sendable (FaultLogEntry) -> Void
    public let logCapacity: Int

    /// `now`: milliseconds on the emulator's clock. `onFault` is called (outside the lock) for every
    /// fault applied, for the server's log.
    public init(rules: [FaultRule] = [], logCapacity: Int = 10_000, now: @escaping @Sendable () -> Int64,
                onFault: @escaping @Sendable (FaultLogEntry) -> Void = { _ in }) {
        self.now = now
        self.onFault = onFault
        self.logCapacity = max(1, logCapacity)
        state.withLock { s in
            s.plan = FaultPlan(rules: rules)
            s.nextID = rules.count + 1
        }
        refreshPoints()
    }

    private func refreshPoints() {
        let points = state.withLock { $0.plan.points }
        var mask: UInt8 = 0
        for (i, p) in FaultPoint.allCases.enumerated() where points.contains(p) { mask |= 1 << UInt8(i) }
        activePoints.store(mask, ordering: .releasing)
    }

    public func isActive(_ point: FaultPoint) -> Bool {
        let i = FaultPoint.allCases.firstIndex(of: point)!
        return activePoints.load(ordering: .acquiring) & (1 << UInt8(i)) != 0
    }

    /// The faults to apply to this message at this point (usually none), logged.
    public func decide(_ point: FaultPoint, _ subject: @autoclosure () -> FaultSubject) -> [FaultAction] {
        guard isActive(point) else { return [] }
        let subject = subject()
        let at = now()
        let (entries, actions): ([FaultLogEntry], [FaultAction]) = state.withLock { s in
            let fired = s.plan.decide(point, subject)
            let entries = fired.map { FaultLogEntry(at: at, ruleID: $0.id, action: $0.action.name, subject: subject) }
            for e in entries { Self.append(e, to: &s, capacity: logCapacity) }
            return (entries, fired.map(\.action))
        }
        for e in entries { onFault(e) }
        return actions
    }

    private static func append(_ entry: FaultLogEntry, to s: inout State, capacity: Int) {
        if s.log.count < capacity {
            s.log.append(entry)
        } else {
            s.log[s.logStart] = entry
            s.logStart = (s.logStart + 1) % capacity
        }
    }

    /// A fresh id for a rule given without one.
    public func nextRuleID() -> String {
        state.withLock { s in
            while true {
                let id = "f\(s.nextID)"
                s.nextID += 1
                if s.plan.status(of: id) == nil { return id }
            }
        }
    }

    /// Adds (or replaces) a rule; returns every rule, for the caller to store.
    @discardableResult
    public func put(_ rule: FaultRule) -> [FaultRule] {
        defer { refreshPoints() }
        return state.withLock { s in
            s.plan.put(rule)
            return s.plan.rules
        }
    }

    /// Removes a rule; nil when there was none with that id, else every rule left.
    public func remove(id: String) -> [FaultRule]? {
        defer { refreshPoints() }
        return state.withLock { s in s.plan.remove(id: id) ? s.plan.rules : nil }
    }

    public func removeAll() {
        state.withLock { $0.plan.removeAll() }
        refreshPoints()
    }

    public var rules: [FaultRule] { state.withLock { $0.plan.rules } }

    /// Each rule with how many messages it matched and how many faults it applied.
    public var statusJSON: [JSONValue] {
        state.withLock { s in
            s.plan.statuses.map { st in
                var o = st.rule.json.objectValue ?? [:]
                o["matched"] = .int(Int64(st.matched))
                o["fired"] = .int(Int64(st.fired))
                return .object(o)
            }
        }
    }

    /// The faults applied, oldest first (at most `logCapacity`).
    public var log: [FaultLogEntry] {
        state.withLock { s in Array(s.log[s.logStart...] + s.log[..<s.logStart]) }
    }

    public func clearLog() {
        state.withLock { s in
            s.log.removeAll()
            s.logStart = 0
        }
    }

    /// The rules as stored (a JSON array), and back.
    public static func encode(_ rules: [FaultRule]) -> String {
        JSONValue.array(rules.map(\.json)).encoded()
    }

    public static func decode(_ text: String) throws -> [FaultRule] {
        guard let items = try JSONValue.parse(text).arrayValue else { return [] }
        return try items.enumerated().map { i, item in try FaultRule(json: item, defaultID: "f\(i + 1)") }
    }
}
