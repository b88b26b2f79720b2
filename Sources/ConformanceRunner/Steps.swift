import AppServerAudit
import CCSEmulator
import CCSEngine
import FaultInjection
import PushDomain

/// A scenario's steps against one emulator, in order; the first that does not hold ends the run.
struct Steps {
    let runner: ConformanceRunner
    let emulator: Emulator
    let devices: [SimulatedDevice]
    let appServer: AppServerProcess?
    let scenario: Scenario
    /// Connections that count as old for `expect_new_connection`.
    var known: Set<String>
    var upstreamCount = 0
    var sendCount = 0

    init(runner: ConformanceRunner, emulator: Emulator, devices: [SimulatedDevice], appServer: AppServerProcess?,
         scenario: Scenario) {
        self.runner = runner
        self.emulator = emulator
        self.devices = devices
        self.appServer = appServer
        self.scenario = scenario
        known = Set(emulator.engine.connections().map(\.info.id))
    }

    var engine: Engine { emulator.engine }
    var sender: String { runner.options.senderID }

    func device(_ name: String) -> SimulatedDevice { devices.first { $0.name == name }! }

    /// `$name` stands for the token of the device called `name`; anything else is itself.
    func substitute(_ value: String) -> String {
        value.hasPrefix("$") ? (devices.first { "$" + $0.name == value }?.token ?? value) : value
    }

    func fail(_ index: Int, _ step: Scenario.Step, _ text: String) -> ConformanceRunner.StepFailure {
        ConformanceRunner.StepFailure(description: "step \(index + 1) (\(Self.kind(step))): \(text)")
    }

    mutating func perform() async throws {
        for (i, step) in scenario.steps.enumerated() {
            try await perform(step, index: i)
        }
    }

    /// Why the scenario fails on its own rules, or nil: read only once no HTTP send is still being
    /// answered (the runner waits for that), since a retry's delivery can reach the device before
    /// its answer reaches the audit.
    static func brokenRules(_ scenario: Scenario, _ findings: [AuditFinding]) -> String? {
        let broken = scenario.rules.filter { rule in findings.contains { $0.rule == rule } }
        guard !broken.isEmpty else { return nil }
        return "audit: broken \(broken.map(\.rawValue).joined(separator: ", ")): "
            + findings.filter { broken.contains($0.rule) }.prefix(3).map(\.text).joined(separator: "; ")
    }

    mutating func perform(_ step: Scenario.Step, index i: Int) async throws {
        switch step {
        case .upstream(let from, let data, let messageID, let count):
            try await upstream(from: from, data: data, messageID: messageID, count: count, step: step, index: i)
        case .send(let to, let data, let id, let padBytes):
            try send(to: to, data: data, id: id, padBytes: padBytes, step: step, index: i)
        case .expectDownstream(let name, let count, let within):
            try await expectDownstream(name: name, count: count, within: within, step: step, index: i)
        case .expectAcked(let within):
            // First every device's ACKs must have reached the emulator and their writes (and so the
            // receipts they make) be done; then nothing may be left unACKed by the app server.
            let engine = self.engine, sender = self.sender, tokens = devices.map(\.token)
            guard await runner.waitUntil(within, { tokens.allSatisfy { engine.handedOverUnacknowledged(token: $0) == 0 } }) else {
                throw fail(i, step, "the devices did not ACK what they were handed within \(within) ms")
            }
            await engine.sync()
            guard await runner.waitUntil(within, { !engine.outbound().contains { $0.senderID == sender } }) else {
                let left = engine.outbound().filter { $0.senderID == sender }.map(\.messageID)
                throw fail(i, step, "not ACKed within \(within) ms: \(left.prefix(5).joined(separator: ", "))")
            }
        case .fault(let json):
            var fields = json.objectValue ?? [:]
            if fields["sender"] == nil { fields["sender"] = .string(sender) }
            // A rule for one device's token: `"token": "$a"`.
            if let token = fields["token"]?.stringValue { fields["token"] = .string(substitute(token)) }
            let rule: FaultRule
            do {
                rule = try FaultRule(json: .object(fields), defaultID: engine.faults.nextRuleID())
            } catch {
                throw fail(i, step, "invalid fault rule: \(error)")
            }
            try await engine.putFaultRule(rule)
        case .device(let name, let action):
            let d = device(name)
            switch action {
            case .offline: await d.disconnect()
            case .online:
                try await d.connect(host: "127.0.0.1", port: emulator.info.devicePort, caPEM: emulator.info.caCertPEM,
                                    group: runner.group)
            case .uninstall: try await engine.uninstall(token: d.token)
            case .foreground: _ = try await engine.setDeviceState(token: d.token, foreground: true, idle: nil)
            case .background: _ = try await engine.setDeviceState(token: d.token, foreground: false, idle: nil)
            case .idle: _ = try await engine.setDeviceState(token: d.token, foreground: nil, idle: true)
            case .active: _ = try await engine.setDeviceState(token: d.token, foreground: nil, idle: false)
            case .refreshToken: _ = try await engine.refreshToken(d.token)
            }
        case .drain:
            let mine = engine.connections().filter { $0.info.senderID == sender && !$0.draining }
            guard !mine.isEmpty else { throw fail(i, step, "the app server has no open connection to drain") }
            known.formUnion(engine.connections().map(\.info.id))
            for c in mine { engine.drain(connectionID: c.info.id) }
        case .expectNewConnection(let within):
            let engine = self.engine, sender = self.sender, known = self.known
            guard await runner.waitUntil(within, {
                engine.connections().contains { $0.info.senderID == sender && !$0.draining && !known.contains($0.info.id) }
            }) else {
                throw fail(i, step, "no new connection within \(within) ms")
            }
            self.known.formUnion(engine.connections().map(\.info.id))
        case .advanceClock(let millis):
            do { _ = try await engine.advanceClock(byMillis: millis) } catch {
                throw fail(i, step, "\(error) (set \"clock\": \"virtual\" in the scenario)")
            }
        case .wait(let millis):
            try? await Task.sleep(for: .milliseconds(millis))
        case .expectAudit(let clean, let broken):
            // A send still being answered has not told the audit yet (see `brokenRules`).
            let audit = engine.audit
            _ = await runner.waitUntil(runner.options.startupTimeoutMillis) { audit.openHTTPRequests == 0 }
            let findings = audit.findings(sender: sender)
            for rule in clean where findings.contains(where: { $0.rule == rule }) {
                throw fail(i, step, "\(rule.rawValue) broken: \(findings.first { $0.rule == rule }!.text)")
            }
            for rule in broken where !findings.contains(where: { $0.rule == rule }) {
                throw fail(i, step, "\(rule.rawValue) was expected to be broken and was kept")
            }
        }
    }

    /// A burst of upstream messages from one device: every message goes out before any answer is awaited.
    private mutating func upstream(from: String, data: [String: String], messageID: String?, count: Int,
                                   step: Scenario.Step, index i: Int) async throws {
        let d = device(from)
        var fields: [String: JSONValue] = [:]
        for (k, v) in data { fields[k] = .string(substitute(v)) }
        var ids: [String] = []
        for _ in 0..<count {
            upstreamCount += 1
            let id = count == 1 ? (messageID ?? "up-\(upstreamCount)") : "\(messageID ?? "up")-\(upstreamCount)"
            let message: JSONValue = .object(["to": .string("\(sender)@gcm.googleapis.com"), "message_id": .string(id),
                                               "data": .object(fields)])
            guard d.sendUpstream(message) else { throw fail(i, step, "device \(from) is not connected") }
            ids.append(id)
        }
        for id in ids {
            guard await runner.waitUntil(10_000, { d.answer(to: id) != nil }) else {
                throw fail(i, step, "the emulator did not answer upstream \(id) from device \(from)")
            }
            if d.answer(to: id)?["message_type"]?.stringValue != "sent" {
                throw fail(i, step, "upstream \(id) was refused: \(d.answer(to: id)!.encoded())")
            }
        }
    }

    /// One send request written to an HTTP app server's stdin.
    private mutating func send(to: String, data: [String: String], id: String?, padBytes: Int,
                               step: Scenario.Step, index i: Int) throws {
        sendCount += 1
        var fields: [String: JSONValue] = data.mapValues { .string(substitute($0)) }
        if padBytes > 0 { fields["pad"] = .string(String(repeating: "x", count: padBytes)) }
        let request: JSONValue = .object(["send_to": .string(device(to).token), "data": .object(fields),
                                          "id": .string(id ?? "send-\(sendCount)")])
        guard let appServer else { throw fail(i, step, "no app server to write to (HTTP scenarios need --app-server-cmd)") }
        guard appServer.writeLine(request.encoded()) else {
            throw fail(i, step, appServer.isRunning ? "the app server closed its stdin"
                                                    : "the app server exited (status \(appServer.exitStatus))")
        }
    }

    private func expectDownstream(name: String, count: Int, within: Int, step: Scenario.Step, index i: Int) async throws {
        let d = device(name)
        // An HTTP app server is not watched through a connection: its exit ends the wait at once.
        let server = scenario.appServer == .http ? appServer : nil
        guard await runner.waitUntil(within, { d.unconsumed >= count || server?.isRunning == false }),
              d.unconsumed >= count else {
            if let server, !server.isRunning {
                throw fail(i, step, "the app server exited (status \(server.exitStatus)); device \(name) received \(d.unconsumed) of \(count) downstream message(s)")
            }
            throw fail(i, step, "device \(name) received \(d.unconsumed) of \(count) downstream message(s) within \(within) ms")
        }
        _ = d.take(count)
    }

    static func kind(_ step: Scenario.Step) -> String {
        switch step {
        case .upstream: return "upstream"
        case .send: return "send"
        case .expectDownstream: return "expect_downstream"
        case .expectAcked: return "expect_acked"
        case .fault: return "fault"
        case .device: return "device"
        case .drain: return "drain"
        case .expectNewConnection: return "expect_new_connection"
        case .advanceClock: return "advance_clock"
        case .wait: return "wait"
        case .expectAudit: return "expect_audit"
        }
    }
}
