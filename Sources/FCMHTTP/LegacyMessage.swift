import CCSProtocol
import PushDomain
import GoogleAuth

/// A legacy `/fcm/send` request after validation.
struct LegacySendRequest: Sendable, Equatable {
    var message: Message
    var target: Target
    /// The registration tokens, in request order (one result each); empty for topic, condition and
    /// device-group sends.
    var tokens: [String]
}

/// How a legacy request is refused before anything is sent.
enum LegacyRefusal: Error, Sendable, Equatable {
    /// HTTP 400 with this reason text (bad JSON, a field of the wrong type, too many tokens).
    case badRequest(String)
    /// HTTP 200, every result (one per token, at least one) carrying this error name
    /// (`MissingRegistration`, `InvalidTtl`, `MessageTooBig`, `InvalidDataKey`, `InvalidParameters`).
    case messageError(String, tokens: Int)
}

/// The legacy HTTP API's body: the JSON of a CCS downstream message, plus `registration_ids`
/// (1 … 1000), `restricted_package_name` and the deprecated `notification_key`, and without
/// `message_id`. The CCS validation (`DownstreamMessage.validate`) is reused as it is: a legacy body
/// is handed to it with its target rewritten as a CCS `to`.
enum LegacyMessageDecoder {
    static let maximumRegistrationIDs = 1000

    static func decodeJSON(_ text: String, messageID: String) -> Result<LegacySendRequest, LegacyRefusal> {
        let json: JSONValue
        do throws(JSONParseError) {
            json = try JSONValue.parse(text)
        } catch {
            return .failure(.badRequest("JSON_PARSING_ERROR: \(error.description)"))
        }
        guard case .object(let object) = json else {
            return .failure(.badRequest("JSON_PARSING_ERROR: the body must be a JSON object, got \(json.kindDescription)"))
        }
        return decode(object, messageID: messageID)
    }

    static func decode(_ object: [String: JSONValue], messageID: String) -> Result<LegacySendRequest, LegacyRefusal> {
        var ccs = object
        ccs.removeValue(forKey: "registration_ids")
        ccs.removeValue(forKey: "notification_key")
        ccs.removeValue(forKey: "restricted_package_name")
        ccs.removeValue(forKey: "message_id")
        ccs.removeValue(forKey: "message_type")

        var restrictedPackageName: String?
        switch object["restricted_package_name"] {
        case nil, .null?: break
        case .string(let s)?: restrictedPackageName = s.isEmpty ? nil : s
        case let other?:
            return .failure(.badRequest("Field \"restricted_package_name\" must be a JSON java.lang.String: \(other.encoded().prefix(200))"))
        }

        var tokens: [String]?
        switch object["registration_ids"] {
        case nil, .null?: break
        case .array(let items)?:
            if items.count > maximumRegistrationIDs {
                return .failure(.badRequest("Number of messages on bulk (\(items.count)) exceeds maximum allowed (\(maximumRegistrationIDs))"))
            }
            var list: [String] = []
            list.reserveCapacity(items.count)
            for item in items {
                guard case .string(let token) = item else {
                    return .failure(.badRequest("Field \"registration_ids\" must be a JSON array of strings: \(item.encoded().prefix(200))"))
                }
                list.append(token)
            }
            tokens = list
        case let other?:
            return .failure(.badRequest("Field \"registration_ids\" must be a JSON array: \(other.encoded().prefix(200))"))
        }
        var notificationKey: String?
        switch object["notification_key"] {
        case nil, .null?: break
        case .string(let s)?: notificationKey = s.isEmpty ? nil : s
        case let other?:
            return .failure(.badRequest("Field \"notification_key\" must be a JSON java.lang.String: \(other.encoded().prefix(200))"))
        }

        let hasTo: Bool = {
            if case .string(let to)? = object["to"] { return !to.isEmpty }
            return false
        }()
        if let tokens {
            if hasTo || notificationKey != nil {
                return .failure(.messageError("InvalidParameters", tokens: max(1, tokens.count)))
            }
            if tokens.isEmpty { return .failure(.messageError("MissingRegistration", tokens: 1)) }
            // Validated as a CCS message to one token (any token: only its form matters, and a bare
            // token is never a topic); the tokens themselves are the engine's to judge.
            ccs["to"] = .string("registration_ids")
        } else if let notificationKey {
            if hasTo { return .failure(.messageError("InvalidParameters", tokens: 1)) }
            ccs["to"] = .string(notificationKey)
        }

        let message: DownstreamMessage
        switch DownstreamMessage.validate(ccs, messageID: messageID) {
        case .success(let m):
            message = m
        case .failure(let error):
            if let name = error.legacyHTTPError {
                return .failure(.messageError(name, tokens: max(1, tokens?.count ?? 1)))
            }
            return .failure(.badRequest(error.text))
        }

        var canonical = message.canonical
        canonical.restrictedPackageName = restrictedPackageName
        // Delivery receipts are an XMPP feature: over HTTP the flag is ignored (there is no
        // connection to send them on that belongs to this request).
        canonical.deliveryReceiptRequested = false
        if let tokens {
            return .success(LegacySendRequest(message: canonical, target: .tokens(tokens), tokens: tokens))
        }
        if let notificationKey {
            return .success(LegacySendRequest(message: canonical, target: .group(notificationKey), tokens: []))
        }
        let target = message.canonicalTarget
        if case .token(let token) = target {
            return .success(LegacySendRequest(message: canonical, target: target, tokens: [token]))
        }
        return .success(LegacySendRequest(message: canonical, target: target, tokens: []))
    }

    /// The plain-text form: `registration_id=TOKEN&collapse_key=…&time_to_live=…&delay_while_idle=1&data.KEY=VALUE`.
    /// Mapped onto the JSON fields and validated the same way. Booleans are `1`/`true` or `0`/`false`.
    static func decodeForm(_ body: String, messageID: String) -> Result<LegacySendRequest, LegacyRefusal> {
        guard let fields = FormBody.decode(body) else {
            return .failure(.badRequest("the body is not valid application/x-www-form-urlencoded text (a broken %-escape, or not UTF-8)"))
        }
        var object: [String: JSONValue] = [:]
        var data: [String: JSONValue] = [:]
        var token: String?
        let booleans: Set<String> = ["delay_while_idle", "dry_run", "content_available", "mutable_content"]
        for (name, value) in fields {
            if name.hasPrefix("data.") {
                let key = String(name.dropFirst(5))
                if data[key] == nil { data[key] = .string(value) }
            } else if name == "registration_id" {
                if token == nil { token = value }
            } else if booleans.contains(name) {
                switch value.lowercased() {
                case "1", "true": object[name] = .bool(true)
                case "0", "false", "": object[name] = .bool(false)
                default: object[name] = .string(value)
                }
            } else if ["collapse_key", "time_to_live", "priority", "restricted_package_name"].contains(name) {
                if object[name] == nil { object[name] = .string(value) }
            }
            // Anything else is ignored, as unknown JSON fields are.
        }
        if let token, !token.isEmpty { object["to"] = .string(token) }
        if !data.isEmpty { object["data"] = .object(data) }
        return decode(object, messageID: messageID)
    }
}
