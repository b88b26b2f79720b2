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

    /// Where the obligation is stated: the public documents by the names docs/sources.md lists them
    /// under (with their addresses), and the section numbers docs/conformance.md cites.
    public var source: String {
        switch self {
        case .ackUpstream:
            return "GCM CCS guide, Upstream Messages and Flow Control; FCM, Receive upstream messages (CCS §4, §5.1 in docs/sources.md)"
        case .ackReceipts: return "GCM CCS guide, Receive return receipts (CCS §5.2 in docs/sources.md)"
        case .pendingLimit: return "GCM CCS guide, Flow Control (CCS §4 in docs/sources.md)"
        case .drainReconnect, .drainNoSend:
            return "GCM CCS guide, control messages: CONNECTION_DRAINING (CCS §1.7 in docs/sources.md)"
        case .retryBackoff:
            return "GCM CCS guide, the NACK error codes (exponential backoff); FCM legacy HTTP reference and FCM v1 ErrorCode "
                + "(Retry-After on 5xx and 429) (CCS §3.3, HTTP §3, §4 in docs/sources.md)"
        case .noResendAcked: return "GCM CCS guide, Message Format (the ACK) and Flow Control (CCS §3.1, §4 in docs/sources.md)"
        case .dropUnregistered:
            return "GCM CCS guide, NACK DEVICE_UNREGISTERED; FCM legacy HTTP reference, NotRegistered; FCM v1 ErrorCode, "
                + "UNREGISTERED (CCS §3.3, HTTP §3, §4 in docs/sources.md)"
        case .useCanonicalID:
            return "GCM CCS guide, the ACK's registration_id; FCM legacy HTTP reference, registration_id in results "
                + "(CCS §3.1, §7.1 in docs/sources.md)"
        case .wellFormed:
            return "FCM XMPP reference, downstream messages; GCM CCS guide, NACKs and stanza errors (CCS §2, §3.3, §3.4 in docs/sources.md)"
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
