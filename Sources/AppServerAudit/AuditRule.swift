/// The client obligations the audit checks, each with where the spec states it.
public enum AuditRule: String, Sendable, CaseIterable {
    /// Every upstream message is ACKed, on the connection that delivered it.
    case ackUpstream = "ack-upstream"
    /// Every delivery receipt (`dr2:…`) is ACKed.
    case ackReceipts = "ack-receipts"
    /// Never more than 100 downstream messages waiting for their ACK/NACK on one connection.
    case pendingLimit = "pending-limit"
    /// After CONNECTION_DRAINING, a new connection is opened.
    case drainReconnect = "drain-reconnect"
    /// After CONNECTION_DRAINING, no new downstream on the drained connection.
    case drainNoSend = "drain-no-send"
    /// A message NACKed with a retryable code (or an HTTP 5xx/429) is retried no sooner than
    /// exponential backoff from 1 s allows, or than `Retry-After` says.
    case retryBackoff = "retry-backoff"
    /// A message id that was ACKed is not sent again.
    case noResendAcked = "no-resend-acked"
    /// A token answered DEVICE_UNREGISTERED / NotRegistered / UNREGISTERED is not sent to again.
    case dropUnregistered = "drop-unregistered"
    /// A token whose answer named a canonical registration id is not sent to again: the new one is.
    case useCanonicalID = "use-canonical-id"
    /// Stanzas and JSON are well formed (no INVALID_JSON, BAD_ACK or stanza error).
    case wellFormed = "well-formed"
    /// HTTP: a request answered 400 (INVALID_ARGUMENT, a malformed legacy request) is not sent again
    /// unchanged: only a fixed request can succeed.
    case noRetryInvalid = "no-retry-invalid"
    /// HTTP v1: one OAuth2 access token serves every send until it nears its expiry.
    case reuseAccessToken = "reuse-access-token"
    /// HTTP v1: an access token answered 401 is not presented again; a new one is fetched.
    case refreshAccessToken = "refresh-access-token"
    /// HTTP: no send exceeds FCM's documented limits (4096-byte payload, reserved data keys).
    case messageLimits = "message-limits"

    public var title: String {
        switch self {
        case .ackUpstream: return "every upstream message is ACKed on the connection that delivered it"
        case .ackReceipts: return "every delivery receipt is ACKed"
        case .pendingLimit: return "never more than 100 unanswered downstream messages per connection"
        case .drainReconnect: return "a new connection is opened after CONNECTION_DRAINING"
        case .drainNoSend: return "nothing new is sent on a draining connection"
        case .retryBackoff: return "retries wait for exponential backoff from 1 s, or for Retry-After"
        case .noResendAcked: return "a message id already ACKed is not sent again"
        case .dropUnregistered: return "an unregistered token is not sent to again"
        case .useCanonicalID: return "after an answer names a canonical registration id, the old token is not sent to again"
        case .wellFormed: return "stanzas and JSON are well formed"
        case .noRetryInvalid: return "a request answered 400 is not sent again unchanged"
        case .reuseAccessToken: return "one OAuth2 access token serves many sends until it nears expiry"
        case .refreshAccessToken: return "an access token answered 401 is replaced by a newly fetched one"
        case .messageLimits: return "no send exceeds the 4096-byte payload limit or uses a reserved data key"
        }
    }

    /// Where the obligation is stated (the spec files under shared/spec/, as docs/conformance.md cites them).
    public var source: String {
        switch self {
        case .ackUpstream: return "ccs-protocol.md §4, §5.1"
        case .ackReceipts: return "ccs-protocol.md §5.2"
        case .pendingLimit: return "ccs-protocol.md §4"
        case .drainReconnect, .drainNoSend: return "ccs-protocol.md §1.7"
        case .retryBackoff: return "ccs-protocol.md §3.3; fcm-http.md (Retry-After on 5xx/429)"
        case .noResendAcked: return "ccs-protocol.md §3.1, §4"
        case .dropUnregistered: return "ccs-protocol.md §3.3; fcm-http.md (NotRegistered, UNREGISTERED)"
        case .useCanonicalID: return "ccs-protocol.md §3.1 (the ACK's registration_id), §7.1 (registration_id in legacy results)"
        case .wellFormed: return "ccs-protocol.md §2, §3.3, §3.4"
        // The HTTP-only rules cite Google's public pages (docs/conformance.md, "The HTTP rules").
        case .noRetryInvalid:
            return "https://firebase.google.com/docs/cloud-messaging/scale-fcm#handling-retries; "
                + "https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode (INVALID_ARGUMENT)"
        case .reuseAccessToken:
            return "https://developers.google.com/identity/protocols/oauth2/service-account (an access token is reused until it expires)"
        case .refreshAccessToken:
            return "https://developers.google.com/identity/protocols/oauth2/service-account; "
                + "https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode (UNAUTHENTICATED)"
        case .messageLimits:
            return "https://firebase.google.com/docs/cloud-messaging/concept-options#notifications_and_data_messages (4096 bytes); "
                + "https://firebase.google.com/docs/cloud-messaging/http-server-ref (MessageTooBig, InvalidDataKey)"
        }
    }
}

/// One piece of evidence: a stanza or request, by id, with its time.
public struct AuditEvidence: Sendable, Equatable {
    public var at: Int64
    public var what: String
    public var messageID: String?
    public var connection: String?

    public init(at: Int64, what: String, messageID: String? = nil, connection: String? = nil) {
        self.at = at
        self.what = what
        self.messageID = messageID
        self.connection = connection
    }
}

/// An obligation broken.
public struct AuditFinding: Sendable, Equatable {
    public var rule: AuditRule
    public var sender: String
    public var connection: String?
    public var at: Int64
    public var text: String
    public var evidence: [AuditEvidence]
    /// Where the obligation is stated: the rule's source, or for a finding about an HTTP request the
    /// rule's `httpSource`.
    public var source: String

    public init(rule: AuditRule, sender: String, connection: String?, at: Int64, text: String, evidence: [AuditEvidence],
                source: String? = nil) {
        self.source = source ?? rule.source
        self.rule = rule
        self.sender = sender
        self.connection = connection
        self.at = at
        self.text = text
        self.evidence = evidence
    }
}
