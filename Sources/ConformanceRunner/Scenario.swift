import AppServerAudit
import PushDomain

/// A conformance scenario: devices, steps, and the audit rules it judges (docs/conformance.md,
/// "Scenario files"). Written as JSON.
public struct Scenario: Sendable, Equatable {
    public enum Clock: String, Sendable { case wall, virtual }

    /// How the app server under test reaches FCM, and so how the runner asks it to send.
    public enum AppServerKind: String, Sendable {
        /// Over CCS: it must connect before the steps run; `upstream` steps with `send_to` make it send.
        case ccs
        /// Over the HTTP APIs (v1 or legacy): `send` steps write requests to its stdin.
        case http
    }

    public enum DeviceAction: String, Sendable, CaseIterable {
        case offline, online, uninstall, foreground, background, idle, active
        /// A token refresh: the device's first token (`$name`) then answers with a canonical id.
        case refreshToken = "refresh_token"
    }

    public enum Step: Sendable, Equatable {
        /// A device sends an upstream message; values `$name` become that device's token.
        case upstream(from: String, data: [String: String], messageID: String?, repeat: Int)
        /// HTTP app servers: one request on the app server's stdin to send `data` (plus `padBytes`
        /// bytes under `pad`, to build a message over the limits) to the device `to`.
        case send(to: String, data: [String: String], id: String?, padBytes: Int)
        /// The device receives `count` more downstream messages (since its last expectation) in time.
        case expectDownstream(device: String, count: Int, withinMillis: Int)
        /// Every upstream message and receipt sent to the app server is ACKed in time.
        case expectAcked(withinMillis: Int)
        /// A fault rule (the admin API's shape); the sender defaults to the scenario's.
        case fault(JSONValue)
        case device(String, DeviceAction)
        /// CONNECTION_DRAINING on every connection of the app server.
        case drain
        /// A connection opened after the last drain (or the scenario's start), in time.
        case expectNewConnection(withinMillis: Int)
        case advanceClock(millis: Int64)
        /// Plain waiting: only where no fact can be waited on (documented as a last resort).
        case wait(millis: Int)
        case expectAudit(clean: [AuditRule], broken: [AuditRule])
    }

    public var name: String
    public var description: String
    /// Judged at the end: each must be kept (no finding). Also the scenario's JUnit properties.
    public var rules: [AuditRule]
    public var clock: Clock
    public var appServer: AppServerKind
    public var devices: [String]
    public var steps: [Step]
}

public struct ScenarioError: Error, Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var description: String { "\(path): \(reason)" }
}

extension Scenario {
    static let defaultWithin = 10_000

    public init(json: JSONValue, source: String) throws(ScenarioError) {
        func fail(_ path: String, _ reason: String) -> ScenarioError { ScenarioError(path: "\(source): \(path)", reason: reason) }
        guard let o = json.objectValue else { throw fail("scenario", "must be a JSON object") }
        guard let name = o["name"]?.stringValue, !name.isEmpty, name.utf8.count <= 200 else {
            throw fail("name", "a string of 1 to 200 bytes is required")
        }
        self.name = name
        description = o["description"]?.stringValue ?? ""
        rules = []
        for (i, r) in (o["rules"]?.arrayValue ?? []).enumerated() {
            guard let id = r.stringValue, let rule = AuditRule(rawValue: id) else {
                throw fail("rules[\(i)]", "one of \(AuditRule.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            rules.append(rule)
        }
        switch o["clock"]?.stringValue ?? "wall" {
        case "wall": clock = .wall
        case "virtual": clock = .virtual
        default: throw fail("clock", "\"wall\" or \"virtual\"")
        }
        guard let kind = AppServerKind(rawValue: o["app_server"]?.stringValue ?? "ccs") else {
            throw fail("app_server", "\"ccs\" or \"http\"")
        }
        appServer = kind
        devices = []
        for (i, d) in (o["devices"]?.arrayValue ?? []).enumerated() {
            guard let n = d.stringValue, Self.isName(n) else { throw fail("devices[\(i)]", "a name of letters, digits, '-' and '_'") }
            guard !devices.contains(n) else { throw fail("devices[\(i)]", "\(n) is named twice") }
            devices.append(n)
        }
        guard devices.count <= 100 else { throw fail("devices", "at most 100") }
        guard let steps = o["steps"]?.arrayValue else { throw fail("steps", "an array is required") }
        self.steps = []
        for (i, s) in steps.enumerated() {
            let step = try Self.step(s, path: "steps[\(i)]", devices: devices, fail: fail)
            if case .send = step, appServer != .http { throw fail("steps[\(i)].send", "only in scenarios with \"app_server\": \"http\"") }
            self.steps.append(step)
        }
    }

    static func isName(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 64 && s.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 45 || $0 == 95 }
    }

    private static func step(_ json: JSONValue, path: String, devices: [String],
                             fail: (String, String) -> ScenarioError) throws(ScenarioError) -> Step {
        guard let o = json.objectValue, o.count == 1, let only = o.first else {
            throw fail(path, "a step is an object with one key naming its kind")
        }
        let (kind, body) = (only.key, only.value)
        let p = "\(path).\(kind)"
        func within(_ key: String = "within_ms") throws(ScenarioError) -> Int {
            guard let v = body[key] else { return defaultWithin }
            guard let n = v.intValue, (0...3_600_000).contains(n) else { throw fail("\(p).\(key)", "milliseconds, 0 to 3600000") }
            return Int(n)
        }
        func device(_ key: String) throws(ScenarioError) -> String {
            guard let d = body[key]?.stringValue, devices.contains(d) else {
                throw fail("\(p).\(key)", "one of the scenario's devices (\(devices.joined(separator: ", ")))")
            }
            return d
        }
        func rules(_ key: String) throws(ScenarioError) -> [AuditRule] {
            var out: [AuditRule] = []
            for (i, r) in (body[key]?.arrayValue ?? []).enumerated() {
                guard let id = r.stringValue, let rule = AuditRule(rawValue: id) else {
                    throw fail("\(p).\(key)[\(i)]", "an audit rule id")
                }
                out.append(rule)
            }
            return out
        }
        switch kind {
        case "upstream":
            var data: [String: String] = [:]
            for (k, v) in body["data"]?.objectValue ?? [:] {
                guard let s = v.stringValue else { throw fail("\(p).data.\(k)", "values are strings (FCM data)") }
                data[k] = s
            }
            let count = body["repeat"]?.intValue ?? 1
            guard (1...1000).contains(count) else { throw fail("\(p).repeat", "1 to 1000") }
            return .upstream(from: try device("from"), data: data, messageID: body["message_id"]?.stringValue, repeat: Int(count))
        case "send":
            var data: [String: String] = [:]
            for (k, v) in body["data"]?.objectValue ?? [:] {
                guard let s = v.stringValue else { throw fail("\(p).data.\(k)", "values are strings (FCM data)") }
                data[k] = s
            }
            let pad = body["pad_bytes"]?.intValue ?? 0
            guard (0...65_536).contains(pad) else { throw fail("\(p).pad_bytes", "0 to 65536") }
            if let id = body["id"], !(id.stringValue.map(isName) ?? false) {
                throw fail("\(p).id", "a name of letters, digits, '-' and '_'")
            }
            return .send(to: try device("to"), data: data, id: body["id"]?.stringValue, padBytes: Int(pad))
        case "expect_downstream":
            let count = body["count"]?.intValue ?? 1
            guard (1...10_000).contains(count) else { throw fail("\(p).count", "1 to 10000") }
            return .expectDownstream(device: try device("device"), count: Int(count), withinMillis: try within())
        case "expect_acked":
            return .expectAcked(withinMillis: try within())
        case "fault":
            guard body.objectValue != nil else { throw fail(p, "a fault rule object") }
            return .fault(body)
        case "device":
            guard let a = body["go"]?.stringValue, let action = DeviceAction(rawValue: a) else {
                throw fail("\(p).go", DeviceAction.allCases.map(\.rawValue).joined(separator: ", "))
            }
            return .device(try device("name"), action)
        case "drain":
            return .drain
        case "expect_new_connection":
            return .expectNewConnection(withinMillis: try within())
        case "advance_clock":
            guard let ms = body["ms"]?.intValue, ms >= 0, ms <= 10 * 365 * 86_400_000 else {
                throw fail("\(p).ms", "milliseconds, 0 to 10 years")
            }
            return .advanceClock(millis: ms)
        case "wait":
            guard let ms = body["ms"]?.intValue, (0...600_000).contains(ms) else { throw fail("\(p).ms", "0 to 600000") }
            return .wait(millis: Int(ms))
        case "expect_audit":
            return .expectAudit(clean: try rules("clean"), broken: try rules("broken"))
        default:
            throw fail(path, "unknown step \(kind): upstream, send, expect_downstream, expect_acked, fault, device, drain, expect_new_connection, advance_clock, wait, expect_audit")
        }
    }
}
