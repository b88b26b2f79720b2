extension AuditRule {
    /// Where the obligation is stated for HTTP app servers (v1 and legacy): Google's public pages.
    /// A finding about an HTTP request cites this (docs/conformance.md, "The HTTP rules").
    public var httpSource: String {
        switch self {
        case .retryBackoff:
            return "https://firebase.google.com/docs/cloud-messaging/scale-fcm#handling-retries; "
                + "https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode (UNAVAILABLE, INTERNAL, QUOTA_EXCEEDED); "
                + "https://firebase.google.com/docs/cloud-messaging/http-server-ref (legacy: Retry-After)"
        case .dropUnregistered:
            return "https://firebase.google.com/docs/cloud-messaging/manage-tokens; "
                + "https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode (UNREGISTERED); "
                + "https://firebase.google.com/docs/cloud-messaging/http-server-ref (legacy: NotRegistered)"
        case .useCanonicalID:
            return "https://firebase.google.com/docs/cloud-messaging/http-server-ref (legacy: registration_id, the canonical registration token)"
        case .noRetryInvalid, .reuseAccessToken, .refreshAccessToken, .messageLimits:
            return source
        case .ackUpstream, .ackReceipts, .pendingLimit, .drainReconnect, .drainNoSend, .noResendAcked, .wellFormed:
            return source
        }
    }
}
