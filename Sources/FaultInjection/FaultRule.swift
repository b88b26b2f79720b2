import PushDomain

/// Where in a message's path a fault can be applied; each front end asks at its own point.
public enum FaultPoint: String, Sendable, CaseIterable {
    /// A downstream stanza an app server sent over CCS, before the engine sees it.
    case ccsDownstream = "ccs_downstream"
    /// A send request to the FCM HTTP APIs (legacy, v1, a `/batch` part), before the engine sees it.
    case httpSend = "http_send"
    /// A notification an APNs provider sent to the binary gateway.
    case apnsNotification = "apns_notification"
    /// A simulated device's ACK of a downstream message.
    case deviceAck = "device_ack"
    /// A downstream message the engine accepted for a device, from any front end.
    case accepted
}

/// What an injected fault does. The names are the scenario files' and the admin API's `action`.
public enum FaultAction: Sendable, Equatable {
    /// CCS: answer the downstream stanza with this NACK instead of sending it (nothing is stored).
    case nack(NackCode, description: String?)
    /// CCS: send the message as usual, but hold its ACK back this long.
    case delayAck(millis: Int)
    /// CCS: send the message as usual and never write its ACK (the app server must resend on a new
    /// connection, spec §4).
    case dropAck
    /// CCS: close the connection (stream end, then the socket) instead of answering this stanza.
    case closeConnection
    /// CCS: answer this stanza as usual, then send CONNECTION_DRAINING on its connection.
    case drain
    /// HTTP: answer with this status (and `Retry-After` when given) instead of sending.
    case httpError(status: Int, retryAfterSeconds: Int?)
    /// APNs: refuse the notification. The binary gateway answers this error-response status, then
    /// closes (Apple's way); the HTTP/2 provider API answers `reason` (one of Apple's, e.g.
    /// `TooManyRequests`) with its status, or the reason matching the status when none is given.
    case apnsError(status: UInt8, reason: String?)
    /// Device: the device's ACK is lost; the message stays in flight and is handed over again when
    /// the device reconnects.
    case loseDeviceAck
    /// Device: the device's ACK takes this long to arrive.
    case delayDeviceAck(millis: Int)
    /// Device: the app is uninstalled right after this message was accepted for it.
    case uninstall

    public var point: FaultPoint {
        switch self {
        case .nack, .delayAck, .dropAck, .closeConnection, .drain: return .ccsDownstream
        case .httpError: return .httpSend
        case .apnsError: return .apnsNotification
        case .loseDeviceAck, .delayDeviceAck: return .deviceAck
        case .uninstall: return .accepted
        }
    }

    public var name: String {
        switch self {
        case .nack: return "nack"
        case .delayAck: return "delay_ack"
        case .dropAck: return "drop_ack"
        case .closeConnection: return "close_connection"
        case .drain: return "drain"
        case .httpError: return "http_error"
        case .apnsError: return "apns_error"
        case .loseDeviceAck: return "lose_device_ack"
        case .delayDeviceAck: return "delay_device_ack"
        case .uninstall: return "uninstall"
        }
    }
}

/// Which messages a rule applies to; every field given must match (none given: every message at
/// the action's point).
public struct FaultScope: Sendable, Equatable {
    public var sender: String?
    public var token: String?
    /// A topic name, with or without `/topics/`: matches sends to that topic.
    public var topic: String?
    /// A pattern for the message id (`*` matches any run of characters): the app server's
    /// `message_id` over CCS, the device message id for device ACKs, the notification identifier
    /// (decimal) for APNs.
    public var messageID: String?

    public init(sender: String? = nil, token: String? = nil, topic: String? = nil, messageID: String? = nil) {
        self.sender = sender
        self.token = token
        self.topic = topic.map(FaultScope.topicName)
        self.messageID = messageID
    }

    static func topicName(_ s: String) -> String {
        s.hasPrefix("/topics/") ? String(s.dropFirst("/topics/".count)) : s
    }

    public func matches(_ subject: FaultSubject) -> Bool {
        if let sender, sender != subject.sender { return false }
        if let token, token != subject.token { return false }
        if let topic, topic != subject.topic.map(FaultScope.topicName) { return false }
        if let messageID {
            guard let id = subject.messageID, Glob.matches(pattern: messageID, id) else { return false }
        }
        return true
    }
}

/// What a front end knows of the message it asks about.
public struct FaultSubject: Sendable, Equatable {
    public var sender: String?
    public var token: String?
    public var topic: String?
    public var messageID: String?
    /// Where it came from, for the log: `ccs:<connection id>`, `http:v1`, `apns:<connection>`, `device:<token>`.
    public var origin: String

    public init(sender: String? = nil, token: String? = nil, topic: String? = nil, messageID: String? = nil,
                origin: String) {
        self.sender = sender
        self.token = token
        self.topic = topic
        self.messageID = messageID
        self.origin = origin
    }
}

/// One fault rule: an action, the messages it applies to, and when it fires among them.
public struct FaultRule: Sendable, Equatable {
    public var id: String
    public var action: FaultAction
    public var scope: FaultScope
    /// Matching messages let through before the rule may fire (e.g. "close after 5 stanzas": 5).
    public var after: Int
    /// How many times it fires at most; nil: every time.
    public var times: Int?
    /// The chance that a matching message (past `after`) gets the fault; draws come from a
    /// generator seeded with `seed`, so the same traffic gets the same faults.
    public var probability: Double
    public var seed: UInt64

    public init(id: String, action: FaultAction, scope: FaultScope = FaultScope(), after: Int = 0, times: Int? = nil,
                probability: Double = 1, seed: UInt64 = 1) {
        self.id = id
        self.action = action
        self.scope = scope
        self.after = after
        self.times = times
        self.probability = probability
        self.seed = seed
    }
}

/// `*` (any run, possibly empty) and literal characters; no other metacharacters.
enum Glob {
    static func matches(pattern: String, _ text: String) -> Bool {
        let p = Array(pattern.utf8), t = Array(text.utf8)
        var pi = 0, ti = 0, star = -1, mark = 0
        while ti < t.count {
            if pi < p.count, p[pi] != UInt8(ascii: "*"), p[pi] == t[ti] {
                pi += 1; ti += 1
            } else if pi < p.count, p[pi] == UInt8(ascii: "*") {
                star = pi; mark = ti; pi += 1
            } else if star >= 0 {
                pi = star + 1; mark += 1; ti = mark
            } else {
                return false
            }
        }
        while pi < p.count, p[pi] == UInt8(ascii: "*") { pi += 1 }
        return pi == p.count
    }
}
