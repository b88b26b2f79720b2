import PushDomain

/// What an app server can send inside `<gcm xmlns="google:mobile:data">`.
public enum AppServerStanza: Sendable, Equatable {
    case downstream(DownstreamMessage)
    /// ACK of an upstream message or a receipt (`"message_type":"ack"`). `to` is the upstream
    /// message's `from`; receipts may be ACKed with or without their `dr2:` prefix.
    case ack(messageID: String, to: String?)
    /// App servers should never send NACKs; decoded so the engine can treat it like an ACK or ignore it.
    case nack(messageID: String, to: String?)
}

public enum AppServerStanzaError: Error, Sendable, Equatable {
    /// No usable `message_id`, or the text is not a JSON object: answered with an XMPP stanza
    /// error (`type="error"`, `<bad-request/>`) whose `<text>` is `description`.
    case stanzaError(description: String)
    /// A NACK to send back (the message_id is known).
    case nack(Nack)
}

public enum AppServerStanzaDecoder {
    public static let missingMessageIDDescription =
        "InvalidJson: JSON_PARSING_ERROR : Missing Required Field: message_id"

    /// Decodes the text content of a `<gcm>` element (entity-decoded; surrounding whitespace allowed).
    public static func decode(_ gcmText: String) -> Result<AppServerStanza, AppServerStanzaError> {
        let json: JSONValue
        do throws(JSONParseError) {
            json = try JSONValue.parse(gcmText)
        } catch {
            if let duplicate = error.duplicateKey { return refuseDuplicate(duplicate, in: gcmText, error) }
            return .failure(.stanzaError(description: "InvalidJson: JSON_PARSING_ERROR : \(error.description)"))
        }
        guard case .object(let object) = json else {
            return .failure(.stanzaError(description:
                "InvalidJson: JSON_PARSING_ERROR : Expected a JSON object but found \(json.kindDescription)"))
        }
        return decode(object)
    }

    /// A key named twice is refused as on every listener (docs/bad-input.md): NACK `INVALID_JSON` when
    /// the message has one `message_id` to NACK; a stanza error when `message_id` itself is repeated
    /// (which of the two would the NACK name?) or missing.
    static func refuseDuplicate(_ duplicate: JSONParseError.DuplicateKey, in gcmText: String,
                                _ error: JSONParseError) -> Result<AppServerStanza, AppServerStanzaError> {
        let description = "InvalidJson: JSON_PARSING_ERROR : \(error.description)"
        guard !(duplicate.depth == 1 && duplicate.name == "message_id"),
              case .object(let object)? = try? JSONValue.parse(gcmText, duplicateKeys: .lastWins) else {
            return .failure(.stanzaError(description: description))
        }
        let messageID: String
        switch object["message_id"] {
        case .string(let s)? where !s.isEmpty: messageID = s
        case .int(let n)?: messageID = String(n)
        default: return .failure(.stanzaError(description: description))
        }
        return .failure(.nack(Nack(messageID: messageID, from: nackAddress(object), code: .invalidJSON,
                                   description: description)))
    }

    /// Decodes an already parsed JSON object.
    public static func decode(_ object: [String: JSONValue]) -> Result<AppServerStanza, AppServerStanzaError> {
        let messageType = MessageTypeField(object["message_type"])
        let rawMessageID = object["message_id"]

        // message_id first: without it nothing can be correlated. A downstream message without one gets
        // the documented stanza error; an ACK without one is a malformed ACK: NACK BAD_ACK (id "").
        switch rawMessageID {
        case nil, .null?, .string("")?:
            if messageType == .ack || messageType == .nack {
                return .failure(.nack(Nack(messageID: "", from: object["to"]?.stringValue, code: .badAck,
                                           description: "InvalidJson: MISSING_REQUIRED_FIELD : Missing Required Field: message_id")))
            }
            return .failure(.stanzaError(description: missingMessageIDDescription))
        default:
            break
        }
        let rawID = rawMessageID!

        switch messageType {
        case .ack: return decodeAck(object, isNack: false, rawID: rawID)
        case .nack: return decodeAck(object, isNack: true, rawID: rawID)
        case .absent, .other: break
        }

        // Downstream (or a message_type an app server may not send).
        let messageID: String
        switch rawID {
        case .string(let string):
            messageID = string
        case .int(let int):
            // Accepted and echoed back as a string: weakly typed clients number their messages.
            messageID = String(int)
        default:
            return .failure(.stanzaError(description:
                "InvalidJson: JSON_TYPE_ERROR : Field \"message_id\" must be a JSON java.lang.String: \(DownstreamMessage.displayText(rawID))"))
        }
        let nackFrom = nackAddress(object)

        if messageType == .other, let rawType = object["message_type"] {
            // Anything but ack/nack: "control", "receipt", garbage, or a non-string.
            let shown = DownstreamMessage.displayText(rawType)
            return .failure(.nack(Nack(
                messageID: messageID, from: nackFrom, code: .invalidJSON,
                description: "InvalidJson: JSON_TYPE_ERROR : Invalid value (\(shown)) for \"message_type\": an app server may only send \"ack\" or \"nack\"")))
        }

        switch DownstreamMessage.validate(object, messageID: messageID) {
        case .success(let message):
            return .success(.downstream(message))
        case .failure(let error):
            return .failure(.nack(Nack(messageID: messageID, from: nackFrom, code: .invalidJSON,
                                       description: error.errorDescription)))
        }
    }

    private static func decodeAck(_ object: [String: JSONValue], isNack: Bool, rawID: JSONValue) -> Result<AppServerStanza, AppServerStanzaError> {
        let toValue = object["to"]
        let to: String?
        switch toValue {
        case nil, .null?: to = nil
        case .string(let string)?: to = string.isEmpty ? nil : string
        default: to = nil
        }
        guard case .string(let messageID) = rawID else {
            return .failure(.nack(Nack(
                messageID: DownstreamMessage.displayText(rawID), from: to, code: .badAck,
                description: "InvalidJson: JSON_TYPE_ERROR : Field \"message_id\" must be a JSON java.lang.String: \(DownstreamMessage.displayText(rawID))")))
        }
        if let toValue, !toValue.isNull, toValue.stringValue == nil {
            return .failure(.nack(Nack(
                messageID: messageID, from: nil, code: .badAck,
                description: "InvalidJson: JSON_TYPE_ERROR : Field \"to\" must be a JSON java.lang.String: \(DownstreamMessage.displayText(toValue))")))
        }
        return .success(isNack ? .nack(messageID: messageID, to: to) : .ack(messageID: messageID, to: to))
    }

    private enum MessageTypeField {
        /// Absent, null or "": a downstream message.
        case absent
        case ack, nack
        /// Any other value, including non-strings.
        case other

        init(_ value: JSONValue?) {
            switch value {
            case nil, .null?, .string("")?: self = .absent
            case .string(let string)?:
                switch string.lowercased() {
                case "ack": self = .ack
                case "nack": self = .nack
                default: self = .other
                }
            default: self = .other
            }
        }
    }

    /// The NACK's `from`: the message's `to`, else its condition.
    private static func nackAddress(_ object: [String: JSONValue]) -> String? {
        if case .string(let to)? = object["to"], !to.isEmpty { return to }
        if case .string(let condition)? = object["condition"], !condition.isEmpty { return condition }
        return nil
    }
}
