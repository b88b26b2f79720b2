import PushDomain

/// A rule as the admin API and scenario files write it:
/// `{"id":"f1","action":"nack","code":"SERVICE_UNAVAILABLE","sender":"123","token":"…","topic":"news",
///   "message_id":"m-*","after":0,"times":1,"probability":0.5,"seed":42}` (docs/conformance.md).
public struct FaultRuleError: Error, Sendable, Equatable, CustomStringConvertible {
    public var field: String
    public var reason: String
    public var description: String { "\(field): \(reason)" }
}

extension FaultRule {
    static let idCharacters = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.".utf8)

    /// Every number is range-checked: nothing a client sends can make a rule that misbehaves.
    public init(json: JSONValue, defaultID: String) throws(FaultRuleError) {
        guard let o = json.objectValue else { throw FaultRuleError(field: "rule", reason: "must be a JSON object") }
        let known: Set<String> = ["id", "action", "code", "description", "delay_ms", "status", "retry_after",
                                  "apns_status", "apns_reason", "sender", "token", "topic", "message_id", "after", "times",
                                  "probability", "seed", "point"]
        if let unknown = o.keys.sorted().first(where: { !known.contains($0) }) {
            throw FaultRuleError(field: unknown, reason: "unknown field")
        }
        func string(_ key: String, max: Int = 4096) throws(FaultRuleError) -> String? {
            guard let v = o[key], !v.isNull else { return nil }
            guard let s = v.stringValue else { throw FaultRuleError(field: key, reason: "must be a string") }
            guard !s.isEmpty, s.utf8.count <= max else {
                throw FaultRuleError(field: key, reason: "must be 1 to \(max) bytes")
            }
            return s
        }
        func int(_ key: String, _ range: ClosedRange<Int64>) throws(FaultRuleError) -> Int64? {
            guard let v = o[key], !v.isNull else { return nil }
            guard let n = v.intValue, range.contains(n) else {
                throw FaultRuleError(field: key, reason: "must be an integer from \(range.lowerBound) to \(range.upperBound)")
            }
            return n
        }

        let id = try string("id", max: 64) ?? defaultID
        guard id.utf8.allSatisfy({ FaultRule.idCharacters.contains($0) }) else {
            throw FaultRuleError(field: "id", reason: "only letters, digits, '-', '_' and '.'")
        }
        guard let actionName = try string("action", max: 64) else {
            throw FaultRuleError(field: "action", reason: "is required: one of \(FaultRule.actionNames.joined(separator: ", "))")
        }
        let action: FaultAction
        switch actionName {
        case "nack":
            guard let codeName = try string("code", max: 64) else {
                throw FaultRuleError(field: "code", reason: "is required for nack: a CCS NACK code such as SERVICE_UNAVAILABLE")
            }
            guard let code = NackCode(rawValue: codeName) else {
                throw FaultRuleError(field: "code", reason: "unknown NACK code \(codeName); one of \(NackCode.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            action = .nack(code, description: try string("description", max: 1000))
        case "delay_ack":
            action = .delayAck(millis: Int(try int("delay_ms", 0...600_000) ?? 1000))
        case "drop_ack": action = .dropAck
        case "close_connection": action = .closeConnection
        case "drain": action = .drain
        case "http_error":
            action = .httpError(status: Int(try int("status", 400...599) ?? 503),
                                retryAfterSeconds: (try int("retry_after", 0...86_400)).map { Int($0) })
        case "apns_error":
            let reason = try string("apns_reason", max: 64)
            // Apple's reasons are words of letters (docs/apns.md lists them); the provider API checks the word.
            if let reason, reason.isEmpty || !reason.utf8.allSatisfy({ (65...90).contains($0) || (97...122).contains($0) }) {
                throw FaultRuleError(field: "apns_reason", reason: "must be one of APNs' reasons, such as TooManyRequests")
            }
            action = .apnsError(status: UInt8(try int("apns_status", 1...255) ?? 10), reason: reason)
        case "lose_device_ack": action = .loseDeviceAck
        case "delay_device_ack":
            action = .delayDeviceAck(millis: Int(try int("delay_ms", 0...600_000) ?? 1000))
        case "uninstall": action = .uninstall
        default:
            throw FaultRuleError(field: "action", reason: "unknown action \(actionName); one of \(FaultRule.actionNames.joined(separator: ", "))")
        }
        let scope = FaultScope(sender: try string("sender", max: 64), token: try string("token"),
                               topic: try string("topic", max: 1024), messageID: try string("message_id", max: 1024))
        var probability = 1.0
        if let v = o["probability"], !v.isNull {
            guard let p = v.numberValue, p > 0, p <= 1 else {
                throw FaultRuleError(field: "probability", reason: "must be a number in (0, 1]")
            }
            probability = p
        }
        self.init(id: id, action: action, scope: scope,
                  after: Int(try int("after", 0...1_000_000_000) ?? 0),
                  times: (try int("times", 1...1_000_000_000)).map { Int($0) },
                  probability: probability,
                  seed: UInt64(try int("seed", 0...Int64.max) ?? 1))
    }

    public static let actionNames = ["nack", "delay_ack", "drop_ack", "close_connection", "drain", "http_error",
                                     "apns_error", "lose_device_ack", "delay_device_ack", "uninstall"]

    /// The rule as it is written (and read back by `init(json:)`).
    public var json: JSONValue {
        var o: [String: JSONValue] = ["id": .string(id), "action": .string(action.name), "point": .string(action.point.rawValue),
                                      "after": .int(Int64(after)), "probability": .number(probability),
                                      "seed": .int(Int64(clamping: seed))]
        if let times { o["times"] = .int(Int64(times)) }
        switch action {
        case .nack(let code, let description):
            o["code"] = .string(code.rawValue)
            if let description { o["description"] = .string(description) }
        case .delayAck(let ms), .delayDeviceAck(let ms): o["delay_ms"] = .int(Int64(ms))
        case .httpError(let status, let retryAfter):
            o["status"] = .int(Int64(status))
            if let retryAfter { o["retry_after"] = .int(Int64(retryAfter)) }
        case .apnsError(let status, let reason):
            o["apns_status"] = .int(Int64(status))
            if let reason { o["apns_reason"] = .string(reason) }
        case .dropAck, .closeConnection, .drain, .loseDeviceAck, .uninstall: break
        }
        if let s = scope.sender { o["sender"] = .string(s) }
        if let s = scope.token { o["token"] = .string(s) }
        if let s = scope.topic { o["topic"] = .string(s) }
        if let s = scope.messageID { o["message_id"] = .string(s) }
        return .object(o)
    }
}
