import DeliveryCore
import PushDomain
import StoreModel
import FaultInjection

/// Fault rules as commands: each change is on disk before it is answered, so that rules survive a
/// restart (their counters and random draws start again from the seed).
extension Engine {
    static let faultRulesMetaKey = "fault_rules"

    /// Adds a rule, or replaces the one with its id.
    public func putFaultRule(_ rule: FaultRule) async throws(DeviceManagementError) {
        _ = try await changeFaultRules { $0.put(rule); return true }
    }

    /// False when no rule has that id.
    public func removeFaultRule(id: String) async throws(DeviceManagementError) -> Bool {
        try await changeFaultRules { $0.remove(id: id) != nil }
    }

    public func removeAllFaultRules() async throws(DeviceManagementError) {
        _ = try await changeFaultRules { $0.removeAll(); return true }
    }

    /// Changes the rules and writes the whole list; under the hub's lock so that two changes are
    /// written in the order they were made.
    private func changeFaultRules(_ body: (FaultInjector) -> Bool) async throws(DeviceManagementError) -> Bool {
        let result: Result<Bool, DeviceManagementError> = await withCheckedContinuation { cont in
            let immediate: Result<Bool, DeviceManagementError>? = state.withLock { _ in
                let before = faults.rules
                guard body(faults) else { return .success(false) }
                let op = StoreOp.setMeta(key: Self.faultRulesMetaKey, value: FaultInjector.encode(faults.rules))
                let faults = self.faults
                let undo = { @Sendable in
                    // Memory as the disk has it (the counters of the rules kept start again).
                    faults.removeAll()
                    for rule in before { faults.put(rule) }
                }
                // Never run inside `submit` (a stopped committer fails it later): `undo` then runs
                // outside this lock, after the change it takes back.
                committer.submit([op], urgent: true) { error in
                    guard let error else { return cont.resume(returning: .success(true)) }
                    undo()
                    cont.resume(returning: .failure(.storeFailure("\(error)")))
                }
                return nil
            }
            if let immediate { cont.resume(returning: immediate) }
        }
        return try result.get()
    }

    /// `.uninstall` rules: the app goes away right after a message was accepted for it.
    func applyAcceptedFaults(sender: String, results: [SendResult]) {
        guard faults.isActive(.accepted) else { return }
        for result in results {
            guard case .accepted(let token, _, _) = result else { continue }
            for action in faults.decide(.accepted, FaultSubject(sender: sender, token: token, origin: "engine")) where action == .uninstall {
                Task { try? await self.uninstall(token: token) }
            }
        }
    }
}

/// The front ends' point of interception: before a front end answers or passes on a message, the
/// rules in force may act on it (docs/conformance.md#faults). The injector stays behind the engine.
extension Engine {
    /// What the fault rules do to this message at `point` (nothing, at the cost of one atomic load,
    /// when no rule acts there; the subject is not even made then).
    public func intercept(_ point: FaultPoint, _ subject: @autoclosure () -> FaultSubject) -> [FaultAction] {
        faults.decide(point, subject())
    }

    /// Whether any rule acts at `point`: a front end skips the work of describing a message otherwise.
    public func intercepts(_ point: FaultPoint) -> Bool { faults.isActive(point) }
}
