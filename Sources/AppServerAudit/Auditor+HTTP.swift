/// The rules only HTTP app servers can break (docs/conformance.md, "The HTTP rules"): a 400 sent
/// again unchanged, a message over FCM's limits, and the OAuth2 access token's life (fetched once
/// and reused, replaced after a 401). The retry, unregistered and canonical-id rules are shared with
/// CCS (`httpSend` in Auditor.swift).
extension Auditor {
    /// An access token fetched from the token endpoint by a service account of `sender`'s project.
    /// `id` names the token in evidence (never the secret token itself).
    public func accessTokenFetched(sender: String, id: String, expiresAtMillis: Int64) {
        guard isEnabled else { return }
        let at = now()
        state.withLock { s in
            if let last = s.senders[sender]?.lastToken {
                if !last.refused, last.expiresAt - at > limits.tokenRefreshMarginMillis {
                    record(&s, .reuseAccessToken, source: AuditRule.reuseAccessToken.httpSource, sender: sender, connection: nil, at: at,
                           text: "fetched access token \(id) while \(last.id) still had \(last.expiresAt - at) ms to live",
                           evidence: [AuditEvidence(at: last.at, what: "access token \(last.id) fetched, good until \(last.expiresAt)"),
                                      AuditEvidence(at: at, what: "access token \(id) fetched")])
                } else {
                    kept(&s, .reuseAccessToken, sender: sender)
                }
            }
            s.senders[sender, default: Sender()].lastToken = FetchedToken(id: id, at: at, expiresAt: expiresAtMillis)
        }
    }

    /// A v1 request of `sender`'s project was answered 401 for its access token `id` (expired on the
    /// emulator's clock, or not one the emulator issued).
    public func accessTokenRefused(sender: String, id: String, api: String) {
        guard isEnabled else { return }
        let at = now()
        state.withLock { s in
            let what = "\(api) request with access token \(id), answered 401"
            if let first = s.senders[sender]?.refusedTokens[id] {
                record(&s, .refreshAccessToken, source: AuditRule.refreshAccessToken.httpSource, sender: sender, connection: nil, at: at,
                       text: "presented access token \(id) again after it was answered 401",
                       evidence: [first, AuditEvidence(at: at, what: what)])
            } else {
                Self.remember(&s.senders[sender, default: Sender()].refusedTokens, id, AuditEvidence(at: at, what: what),
                              limit: limits.maxPerSender)
            }
            if s.senders[sender]?.lastToken?.id == id { s.senders[sender]?.lastToken?.refused = true }
            s.senders[sender, default: Sender()].awaitingRefresh = true
        }
    }

    /// The HTTP-only checks of one send request (called under the lock by `httpSend`).
    func checkHTTPRequest(_ s: inout State, sender: String, at: Int64, what: String, status: Int, bodyDigest: UInt64?,
                          limit: String?, accessToken: String?) {
        if let bodyDigest {
            if let first = s.senders[sender]?.invalidBodies[bodyDigest] {
                record(&s, .noRetryInvalid, sender: sender, connection: nil, at: at,
                       text: "the request answered 400 at \(first.at) was sent again unchanged",
                       evidence: [first, AuditEvidence(at: at, what: what)])
            } else if s.senders[sender]?.invalidBodies.isEmpty == false {
                kept(&s, .noRetryInvalid, sender: sender)
            }
            if status == 400 {
                Self.remember(&s.senders[sender, default: Sender()].invalidBodies, bodyDigest, AuditEvidence(at: at, what: what),
                              limit: limits.maxPerSender)
            }
        }
        if let limit {
            record(&s, .messageLimits, sender: sender, connection: nil, at: at, text: "sent a message over FCM's limits: \(limit)",
                   evidence: [AuditEvidence(at: at, what: what)])
        } else if status < 400 {
            kept(&s, .messageLimits, sender: sender)
        }
        if let accessToken {
            if s.senders[sender]?.awaitingRefresh == true {
                kept(&s, .refreshAccessToken, sender: sender)
                s.senders[sender]?.awaitingRefresh = false
            }
            if s.senders[sender]?.lastToken?.id == accessToken { kept(&s, .reuseAccessToken, sender: sender) }
        }
    }

    /// Adds to a per-sender map that holds at most `limit` entries (one is forgotten for each new one).
    static func remember<K: Hashable>(_ map: inout [K: AuditEvidence], _ key: K, _ value: AuditEvidence, limit: Int) {
        if map[key] == nil, map.count >= limit { map.remove(at: map.startIndex) }
        map[key] = value
    }
}
