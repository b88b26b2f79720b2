import PushDomain

/// What happened to a message at one moment of its life (docs/admin-api.md#message-journal).
public enum JournalEventKind: String, Sendable, CaseIterable {
    /// The emulator accepted it and answered so (ACK, HTTP 200, or an APNs notification taken).
    /// Recorded when the answer goes out, so it follows `stored` and often `handed_over`.
    case accepted
    /// Refused: a NACK code, an HTTP error, an APNs status (`detail` says which).
    case refused
    /// Accepted and deliberately not stored: a dry run / validate-only, or TTL 0 that could not go now.
    case notStored = "not_stored"
    /// Committed to the store (the device's queue).
    case stored
    /// A topic or condition message written once for its audience (`detail`: how many devices).
    case fannedOut = "fanned_out"
    /// Held back by the collapsible-message throttle (`serve --collapsible-throttle`): stored, and
    /// handed over when the device's bucket has room (`detail`: until when).
    case throttled
    /// Written to the device's connection.
    case handedOver = "handed_over"
    /// The device confirmed it.
    case deviceAcked = "device_acked"
    /// The device showed it in the notification tray (app in the background).
    case shownInTray = "shown_in_tray"
    /// The user tapped its tray entry.
    case tapped
    /// The delivery receipt went to an app-server connection.
    case receiptSent = "receipt_sent"
    /// The app server ACKed the delivery receipt.
    case receiptAcked = "receipt_acked"
    /// Its time to live ran out before the device took it.
    case expired
    /// A newer message with the same collapse key replaced it (or the device's collapse-key limit).
    case collapsed
    /// Dropped by the 100-messages limit (the device gets `deleted_messages` instead).
    case discarded
    /// A fault rule acted on it (`detail`: rule and action).
    case faultApplied = "fault_applied"
}

extension JournalEventKind {
    /// How far along its life an event puts a message: a summary's status is its furthest event's
    /// kind, not its latest's. The answer to the app server is recorded when it goes out, often
    /// after the device's confirmation (a live delivery confirmed before its write is answered from
    /// the confirmation), and a message that was delivered must not be listed as merely accepted.
    /// Accepted is further than stored (a stored message is answered after its commit); handed over
    /// further than accepted; ends without delivery (expired, collapsed, discarded) further than
    /// handed over; the device's confirmation, and what follows it, further still. A fault names no
    /// state: least.
    public var progress: Int {
        switch self {
        case .faultApplied: 0
        case .stored, .fannedOut: 1
        case .accepted, .refused: 2
        case .notStored, .throttled: 3
        case .handedOver: 4
        case .expired, .collapsed, .discarded: 5
        case .deviceAcked: 6
        case .shownInTray: 7
        case .tapped: 8
        case .receiptSent: 9
        case .receiptAcked: 10
        }
    }

    /// The kind of the furthest of `kinds` (the latest of equals); nil when there are none.
    public static func furthest<S: Sequence>(of kinds: S) -> JournalEventKind? where S.Element == JournalEventKind {
        kinds.reduce(nil) { best, kind in
            guard let best, best.progress > kind.progress else { return kind }
            return best
        }
    }
}

/// One event of the journal. `messageID` names the message: the id FCM gives it (`0:…%…`, also the
/// id a v1 `name` and a legacy `message_id` carry), or for a message refused before it got one an id
/// the journal makes (`local:…`).
public struct JournalEvent: Sendable, Equatable {
    /// Order of recording; assigned by the journal.
    public var seq: Int64
    /// When (ms since the epoch, on the emulator's clock: virtual when the clock is virtual).
    public var at: Int64
    public var kind: JournalEventKind
    public var messageID: String
    public var sender: String?
    public var token: String?
    public var topic: String?
    public var api: SendAPI?
    /// The app-server connection (CCS) it came in on or went out on.
    public var connection: String?
    /// The id the app server chose (CCS `message_id`, an APNs notification identifier).
    public var clientMessageID: String?
    /// Kind-specific: a NACK code, an HTTP status and error, a fault rule, a count.
    public var detail: String?

    public init(at: Int64, kind: JournalEventKind, messageID: String, sender: String? = nil, token: String? = nil,
                topic: String? = nil, api: SendAPI? = nil, connection: String? = nil,
                clientMessageID: String? = nil, detail: String? = nil) {
        self.seq = 0
        self.at = at
        self.kind = kind
        self.messageID = messageID
        self.sender = sender
        self.token = token
        self.topic = topic
        self.api = api
        self.connection = connection
        self.clientMessageID = clientMessageID
        self.detail = detail
    }

    /// The event as the admin API and the event stream show it.
    public var json: String {
        var w = JSONObjectWriter()
        w.add("seq", seq)
        w.add("at", at)
        w.add("kind", kind.rawValue)
        w.add("message_id", messageID)
        if let sender { w.add("sender", sender) }
        if let token { w.add("token", token) }
        if let topic { w.add("topic", topic) }
        if let api { w.add("api", api.rawValue) }
        if let connection { w.add("connection", connection) }
        if let clientMessageID { w.add("client_message_id", clientMessageID) }
        if let detail { w.add("detail", detail) }
        return w.finished()
    }
}

/// Which messages a journal query asks for; nil fields do not filter.
public struct JournalFilter: Sendable, Equatable {
    public var sender: String?
    public var token: String?
    public var topic: String?
    /// The kind of the message's latest event.
    public var status: JournalEventKind?
    /// Messages with an event at or after this time (ms, the emulator's clock).
    public var since: Int64?
    public var limit: Int

    public static let maximumLimit = 1000

    public init(sender: String? = nil, token: String? = nil, topic: String? = nil, status: JournalEventKind? = nil,
                since: Int64? = nil, limit: Int = 100) {
        self.sender = sender
        self.token = token
        self.topic = topic
        self.status = status
        self.since = since
        self.limit = limit
    }
}

/// One message as a journal query lists it: who, through which API, and where it is now.
public struct JournalMessageSummary: Sendable, Equatable {
    public var messageID: String
    public var sender: String?
    public var tokens: [String]
    public var topic: String?
    public var api: SendAPI?
    public var clientMessageID: String?
    /// The furthest state it reached: the kind of its event with the most `progress` (the latest of
    /// equals), so a message its device confirmed is delivered though its answer came later.
    public var status: JournalEventKind
    public var firstAt: Int64
    public var lastAt: Int64
    public var events: Int

    public var json: String {
        var w = JSONObjectWriter()
        w.add("message_id", messageID)
        if let sender { w.add("sender", sender) }
        w.add("tokens", json: .array(tokens.map(JSONValue.string)))
        if let topic { w.add("topic", topic) }
        if let api { w.add("api", api.rawValue) }
        if let clientMessageID { w.add("client_message_id", clientMessageID) }
        w.add("status", status.rawValue)
        w.add("first_at", firstAt)
        w.add("last_at", lastAt)
        w.add("events", events)
        return w.finished()
    }
}
