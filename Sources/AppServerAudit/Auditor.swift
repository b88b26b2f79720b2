import Locking
import PushDomain

/// Records what app servers do and which client obligations they keep or break, per connection and
/// per sender (docs/conformance.md, "The audit"). Front ends report events; `report` judges.
///
/// Memory is bounded: at most `maxTrackedIDs` ACKed ids and as many retry histories in all senders
/// together (oldest forgotten first; senders come and go, a bound per sender would not hold), at most
/// `maxFindings` findings and the last 10,000 connections.
public final class Auditor: Sendable {
    public struct Limits: Sendable {
        /// An upstream message or receipt not ACKed this long after it was sent is a finding.
        public var ackGraceMillis: Int64 = 10_000
        /// A drained sender with no new connection this long after the drain is a finding.
        public var reconnectGraceMillis: Int64 = 10_000
        /// Downstream arriving this soon after CONNECTION_DRAINING was written was already on its way.
        public var drainInFlightMillis: Int64 = 1_000
        /// The first retry must wait this long; each later one twice the one before.
        public var initialBackoffMillis: Int64 = 1_000
        /// Slack on every backoff check, for clocks and scheduling (0.9: 10 % early is still kept).
        public var backoffTolerance: Double = 0.9
        public var maxPending = 100
        public var maxTrackedIDs = 100_000
        public var maxFindings = 10_000
        /// HTTP: a new access token fetched while the last one still had longer than this to live (and
        /// was never refused) is a needless fetch. Google's client libraries refresh a few minutes
        /// before expiry (google-auth: 3 min 45 s); 5 min covers them.
        public var tokenRefreshMarginMillis: Int64 = 300_000
        /// HTTP: bodies answered 400 and refused access tokens remembered per sender.
        public var maxPerSender = 1_000
        public init() {}
    }

    struct Connection {
        var sender: String
        var openedAt: Int64
        var closedAt: Int64?
        var drainedAt: Int64?
        /// Downstream message ids received and not yet answered (ACK/NACK/stanza error).
        var pending: [String: Int] = [:]
        var pendingCount = 0
        /// Upstream messages and receipts written and not ACKed: id → (sent at, is receipt).
        var outbound: [String: (at: Int64, receipt: Bool)] = [:]
        var sentAfterDrain = false
    }

    struct Retry {
        var failures = 0
        var lastFailureAt: Int64
        var retryAfterMillis: Int64?
    }

    struct Sender {
        var unregistered: [String: AuditEvidence] = [:]
        /// Tokens an answer named a canonical registration id for: the evidence says which.
        var replaced: [String: AuditEvidence] = [:]
        var drains: [(connection: String, at: Int64)] = []
        var lastOpenedAt: Int64 = .min
        var kept: [AuditRule: Int] = [:]
        var broken: [AuditRule: Int] = [:]
        /// HTTP (Auditor+HTTP.swift): bodies answered 400, by digest; the last access token fetched;
        /// access tokens answered 401. Each map holds at most `maxPerSender` entries.
        var invalidBodies: [UInt64: AuditEvidence] = [:]
        var lastToken: FetchedToken?
        var refusedTokens: [String: AuditEvidence] = [:]
        /// A token was refused and no request has since come with a good one.
        var awaitingRefresh = false
    }

    /// An access token the sender's service account fetched (HTTP v1).
    struct FetchedToken {
        var id: String
        var at: Int64
        var expiresAt: Int64
        var refused = false
    }

    /// A sender's message id, or a sender's HTTP target: the keys of the id and retry records.
    struct SenderKey: Hashable {
        var sender: String
        var key: String
    }

    struct State {
        /// Downstream message ids ACKed, per sender.
        var acked = BoundedSet<SenderKey>()
        var retries: [SenderKey: Retry] = [:]
        var retryOrder: [SenderKey] = []
        var retryStart = 0
        var connections: [String: Connection] = [:]
        var connectionOrder: [String] = []
        var senders: [String: Sender] = [:]
        var findings: [AuditFinding] = []
        var findingsDropped = 0
        /// Whether any sender was ever told a token is not registered: until then no send needs the
        /// lookup of its (150-byte) token (set, never cleared but by a whole reset).
        var anyUnregistered = false
        /// The same for canonical registration ids.
        var anyReplaced = false
    }

    let state = Locked(State())
    /// HTTP send requests received and not yet answered: a report read while one is open could miss
    /// what its answer tells the audit (the conformance runner waits for none before it reads).
    private let openRequests = Locked(0)
    let now: @Sendable () -> Int64
    public let limits: Limits
    /// Off (`serve --audit off`, for load tests): every event is ignored and the report is empty.
    public let isEnabled: Bool

    public init(limits: Limits = Limits(), enabled: Bool = true, now: @escaping @Sendable () -> Int64) {
        self.limits = limits
        self.isEnabled = enabled
        self.now = now
    }

    /// Counts one HTTP send request from its arrival to its answer, whatever the answer is.
    public func whileHTTPRequestOpen<T>(_ body: () async throws -> T) async rethrows -> T {
        guard isEnabled else { return try await body() }
        openRequests.withLock { $0 += 1 }
        defer { openRequests.withLock { $0 -= 1 } }
        return try await body()
    }

    /// How many HTTP send requests are being answered now.
    public var openHTTPRequests: Int { openRequests.withLock { $0 } }

    // MARK: events (CCS)

    public func connectionOpened(_ id: String, sender: String) {
        guard isEnabled else { return }
        let at = now()
        state.withLock { s in
            s.connections[id] = Connection(sender: sender, openedAt: at)
            s.connectionOrder.append(id)
            // Closed connections are kept for the report, but not without bound.
            if s.connectionOrder.count > 10_000 {
                let old = s.connectionOrder.removeFirst()
                s.connections[old] = nil
            }
            var snd = s.senders[sender, default: Sender()]
            for d in snd.drains where d.at <= at { snd.kept[.drainReconnect, default: 0] += 1 }
            snd.drains.removeAll { $0.at <= at }
            snd.lastOpenedAt = at
            s.senders[sender] = snd
        }
    }

    public func connectionClosed(_ id: String) {
        guard isEnabled else { return }
        let at = now()
        state.withLock { s in
            guard var c = s.connections[id], c.closedAt == nil else { return }
            c.closedAt = at
            for (messageID, sent) in c.outbound.sorted(by: { $0.value.at < $1.value.at }) {
                let rule: AuditRule = sent.receipt ? .ackReceipts : .ackUpstream
                record(&s, rule, sender: c.sender, connection: id, at: at,
                       text: "\(sent.receipt ? "receipt" : "upstream message") \(messageID) was never ACKed; the connection closed",
                       evidence: [AuditEvidence(at: sent.at, what: "sent to the app server", messageID: messageID, connection: id),
                                  AuditEvidence(at: at, what: "connection closed", connection: id)])
            }
            c.outbound.removeAll()
            if c.drainedAt != nil, !c.sentAfterDrain { s.senders[c.sender, default: Sender()].kept[.drainNoSend, default: 0] += 1 }
            s.connections[id] = c
        }
    }

    /// A downstream stanza arrived on a CCS connection (before it is answered).
    public func downstreamReceived(connection: String, messageID: String, to: String?) {
        guard isEnabled else { return }
        let at = now()
        state.withLock { s in
            // Found once and changed in place through its index (nothing below adds or removes a
            // connection): a copy of the entry would share its `pending` map, which the first change
            // would then copy whole (per message).
            guard let c = s.connections.index(forKey: connection) else { return }
            let (sender, pendingCount, drainedAt) = (s.connections.values[c].sender, s.connections.values[c].pendingCount,
                                                     s.connections.values[c].drainedAt)
            if pendingCount >= limits.maxPending {
                record(&s, .pendingLimit, sender: sender, connection: connection, at: at,
                       text: "downstream \(messageID) sent while \(pendingCount) messages were waiting for their ACK/NACK (the limit is \(limits.maxPending))",
                       evidence: [AuditEvidence(at: at, what: "downstream received", messageID: messageID, connection: connection)])
            } else {
                kept(&s, .pendingLimit, sender: sender)
            }
            if let drained = drainedAt {
                if at - drained > limits.drainInFlightMillis {
                    s.connections.values[c].sentAfterDrain = true
                    record(&s, .drainNoSend, sender: sender, connection: connection, at: at,
                           text: "downstream \(messageID) sent on a connection drained \(at - drained) ms earlier",
                           evidence: [AuditEvidence(at: drained, what: "CONNECTION_DRAINING sent", connection: connection),
                                      AuditEvidence(at: at, what: "downstream received", messageID: messageID, connection: connection)])
                }
            }
            s.connections.values[c].pending[messageID, default: 0] += 1
            s.connections.values[c].pendingCount += 1
            // A retry history exists only after a failure: until then the key (an allocation) is not made.
            checkSend(&s, sender: sender, retryKey: s.retries.isEmpty ? nil : "ccs:" + messageID, messageID: messageID, token: to,
                      connection: connection, at: at, what: "downstream received")
        }
    }

    /// How CCS answered a downstream stanza.
    public enum Answer: Sendable, Equatable {
        case ack
        case nack(code: String)
        case stanzaError(String)
    }

    /// `canonical`: the ACK's `registration_id` (the message went to an earlier token of a refreshed app).
    public func downstreamAnswered(connection: String, messageID: String, to: String?, answer: Answer,
                                   canonical: String? = nil) {
        guard isEnabled else { return }
        let at = now()
        state.withLock { s in
            guard let c = s.connections.index(forKey: connection) else { return }
            let sender = s.connections.values[c].sender
            if let p = s.connections.values[c].pending.index(forKey: messageID) {
                if s.connections.values[c].pending.values[p] <= 1 {
                    s.connections.values[c].pending.remove(at: p)
                } else {
                    s.connections.values[c].pending.values[p] -= 1
                }
                s.connections.values[c].pendingCount -= 1
            }
            // Only the answers that record a finding need it (an ACK, the usual answer, does not).
            var evidence: AuditEvidence { AuditEvidence(at: at, what: "\(answer)", messageID: messageID, connection: connection) }
            switch answer {
            case .ack:
                s.acked.insert(SenderKey(sender: sender, key: messageID), limit: limits.maxTrackedIDs)
                if let canonical, let to {
                    s.senders[sender, default: Sender()].replaced[to] =
                        AuditEvidence(at: at, what: "ACK named \(canonical) as the canonical registration id of \(to)",
                                      messageID: messageID, connection: connection)
                    s.anyReplaced = true
                }
                if !s.retries.isEmpty { forgetRetry(&s, sender: sender, key: "ccs:" + messageID) }
                kept(&s, .wellFormed, sender: sender)
            case .nack(let code):
                switch code {
                case "SERVICE_UNAVAILABLE", "INTERNAL_SERVER_ERROR", "DEVICE_MESSAGE_RATE_EXCEEDED",
                     "TOPICS_MESSAGE_RATE_EXCEEDED", "QUOTA_EXCEEDED":
                    failed(&s, sender: sender, key: "ccs:" + messageID, at: at, retryAfterMillis: nil)
                case "DEVICE_UNREGISTERED":
                    if let to {
                        s.senders[sender, default: Sender()].unregistered[to] = evidence
                        s.anyUnregistered = true
                    }
                case "INVALID_JSON", "BAD_ACK":
                    record(&s, .wellFormed, sender: sender, connection: connection, at: at,
                           text: "NACK \(code) for \(messageID)", evidence: [evidence])
                default: break
                }
            case .stanzaError(let text):
                record(&s, .wellFormed, sender: sender, connection: connection, at: at,
                       text: "stanza error: \(text)", evidence: [evidence])
            }
        }
    }

    public func drained(connection: String) {
        guard isEnabled else { return }
        let at = now()
        state.withLock { s in
            guard var c = s.connections[connection], c.drainedAt == nil else { return }
            c.drainedAt = at
            s.connections[connection] = c
            s.senders[c.sender, default: Sender()].drains.append((connection, at))
        }
    }

    /// An upstream message or a receipt written to an app server.
    public func outboundSent(connection: String, messageID: String, receipt: Bool) {
        guard isEnabled else { return }
        let at = now()
        state.withLock { s in
            s.connections[connection]?.outbound[messageID] = (at, receipt)
        }
    }

    /// An app server's ACK (the receipt's id with or without `dr2:`).
    public func outboundAcknowledged(connection: String, messageID: String) {
        guard isEnabled else { return }
        state.withLock { s in
            guard let sender = s.connections[connection]?.sender else { return }
            var key = messageID
            if s.connections[connection]?.outbound[key] == nil { key = "dr2:" + messageID }
            guard let sent = s.connections[connection]?.outbound.removeValue(forKey: key) else { return }
            kept(&s, sent.receipt ? .ackReceipts : .ackUpstream, sender: sender)
        }
    }

    // MARK: events (HTTP)

    /// A send request to the HTTP APIs and its answer. `targetKey` names what was sent to (a token,
    /// a topic, a condition) so that a retry can be recognised; `unregistered` lists tokens the answer
    /// said are not registered.
    /// `canonical`: old token → the canonical registration id its result named.
    /// `bodyDigest` (of the request body) recognises a request sent again unchanged; `limit` says
    /// which documented limit the message broke, when the answer was MessageTooBig or InvalidDataKey.
    /// `accessToken` is the v1 request's access-token id (Auditor+HTTP.swift).
    public func httpSend(sender: String, api: String, targetKey: String, tokens: [String], status: Int,
                         retryAfterSeconds: Int?, unregistered: [String], canonical: [(old: String, new: String)] = [],
                         bodyDigest: UInt64? = nil, limit: String? = nil, accessToken: String? = nil) {
        guard isEnabled else { return }
        let at = now()
        state.withLock { s in
            // The shared checks below record findings with the rules' CCS sources: relabelled at the end.
            let firstNew = s.findings.count
            defer { for i in firstNew..<s.findings.count { s.findings[i].source = s.findings[i].rule.httpSource } }
            let what = "\(api) request to \(targetKey)" + (accessToken.map { " with access token \($0)" } ?? "") + ", answered \(status)"
            checkHTTPRequest(&s, sender: sender, at: at, what: what, status: status, bodyDigest: bodyDigest, limit: limit,
                             accessToken: accessToken)
            let key = "http:" + targetKey
            for token in tokens {
                checkSend(&s, sender: sender, retryKey: nil, messageID: nil, token: token, connection: nil, at: at,
                          what: what)
            }
            checkRetry(&s, sender: sender, key: key, at: at, what: what, messageID: nil, connection: nil)
            if status >= 500 || status == 429 {
                failed(&s, sender: sender, key: key, at: at, retryAfterMillis: retryAfterSeconds.map { Int64($0) * 1000 })
            } else if status < 400 {
                forgetRetry(&s, sender: sender, key: key)
            }
            for token in unregistered {
                s.senders[sender, default: Sender()].unregistered[token] =
                    AuditEvidence(at: at, what: "\(api) answered that \(token) is not registered")
                s.anyUnregistered = true
            }
            for (old, new) in canonical {
                s.senders[sender, default: Sender()].replaced[old] =
                    AuditEvidence(at: at, what: "\(api) named \(new) as the canonical registration id of \(old)")
                s.anyReplaced = true
            }
        }
    }

    // MARK: rules

    private func checkSend(_ s: inout State, sender: String, retryKey: String?, messageID: String?, token: String?,
                           connection: String?, at: Int64, what: String) {
        if let messageID {
            if s.acked.contains(SenderKey(sender: sender, key: messageID)) {
                record(&s, .noResendAcked, sender: sender, connection: connection, at: at,
                       text: "message id \(messageID) was sent again after it was ACKed",
                       evidence: [AuditEvidence(at: at, what: what, messageID: messageID, connection: connection)])
            } else {
                kept(&s, .noResendAcked, sender: sender)
            }
        }
        if s.anyUnregistered, let token, let first = s.senders[sender]?.unregistered[token] {
            record(&s, .dropUnregistered, sender: sender, connection: connection, at: at,
                   text: "sent to \(token) after it was reported unregistered",
                   evidence: [first, AuditEvidence(at: at, what: what, messageID: messageID, connection: connection)])
        }
        if s.anyReplaced, let token {
            if let named = s.senders[sender]?.replaced[token] {
                record(&s, .useCanonicalID, sender: sender, connection: connection, at: at,
                       text: "sent to \(token) after an answer named its canonical registration id",
                       evidence: [named, AuditEvidence(at: at, what: what, messageID: messageID, connection: connection)])
            } else if s.senders[sender]?.replaced.isEmpty == false {
                kept(&s, .useCanonicalID, sender: sender)
            }
        }
        if let retryKey {
            checkRetry(&s, sender: sender, key: retryKey, at: at, what: what, messageID: messageID, connection: connection)
        }
    }

    private func checkRetry(_ s: inout State, sender: String, key: String, at: Int64, what: String, messageID: String?,
                            connection: String?) {
        guard let retry = s.retries[SenderKey(sender: sender, key: key)] else { return }
        let backoff = limits.initialBackoffMillis << Int64(min(retry.failures - 1, 20))
        let required = retry.retryAfterMillis ?? backoff
        let waited = at - retry.lastFailureAt
        if Double(waited) >= Double(required) * limits.backoffTolerance {
            kept(&s, .retryBackoff, sender: sender)
        } else {
            let why = retry.retryAfterMillis != nil ? "Retry-After asked for \(required) ms"
                : "attempt \(retry.failures + 1) should wait at least \(required) ms"
            record(&s, .retryBackoff, sender: sender, connection: connection, at: at,
                   text: "retried \(waited) ms after failure \(retry.failures); \(why)",
                   evidence: [AuditEvidence(at: retry.lastFailureAt, what: "failure \(retry.failures)", messageID: messageID),
                              AuditEvidence(at: at, what: what, messageID: messageID, connection: connection)])
        }
    }

    private func failed(_ s: inout State, sender: String, key: String, at: Int64, retryAfterMillis: Int64?) {
        let k = SenderKey(sender: sender, key: key)
        if var r = s.retries[k] {
            r.failures += 1
            r.lastFailureAt = at
            r.retryAfterMillis = retryAfterMillis
            s.retries[k] = r
            return
        }
        s.retries[k] = Retry(failures: 1, lastFailureAt: at, retryAfterMillis: retryAfterMillis)
        s.retryOrder.append(k)
        // Oldest first out; entries already forgotten (the message went through) are skipped over.
        while s.retries.count > limits.maxTrackedIDs, s.retryStart < s.retryOrder.count {
            s.retries[s.retryOrder[s.retryStart]] = nil
            s.retryStart += 1
        }
        if s.retryStart > 4096, s.retryStart * 2 > s.retryOrder.count {
            s.retryOrder.removeFirst(s.retryStart)
            s.retryStart = 0
        }
        if s.retryOrder.count > 4 * limits.maxTrackedIDs {
            // Mostly ids whose retry succeeded: keep only those still recorded.
            s.retryOrder = s.retryOrder[s.retryStart...].filter { s.retries[$0] != nil }
            s.retryStart = 0
        }
    }

    private func forgetRetry(_ s: inout State, sender: String, key: String) {
        s.retries[SenderKey(sender: sender, key: key)] = nil
    }

    func kept(_ s: inout State, _ rule: AuditRule, sender: String) {
        s.senders[sender, default: Sender()].kept[rule, default: 0] += 1
    }

    func record(_ s: inout State, _ rule: AuditRule, source: String? = nil, sender: String, connection: String?, at: Int64,
                text: String, evidence: [AuditEvidence]) {
        s.senders[sender, default: Sender()].broken[rule, default: 0] += 1
        guard s.findings.count < limits.maxFindings else {
            s.findingsDropped += 1
            return
        }
        s.findings.append(AuditFinding(rule: rule, sender: sender, connection: connection, at: at, text: text, evidence: evidence,
                                       source: source))
    }

    // MARK: report

    /// ACKed ids and retry histories held (all senders): what `maxTrackedIDs` bounds.
    public var trackedCounts: (acked: Int, retries: Int) {
        state.withLock { ($0.acked.members.count, $0.retries.count) }
    }

    /// Forgets everything (between scenarios), or one sender's part.
    public func reset(sender: String? = nil) {
        state.withLock { s in
            guard let sender else {
                s = State()
                return
            }
            s.senders[sender] = nil
            s.findings.removeAll { $0.sender == sender }
            for k in s.retries.keys where k.sender == sender { s.retries[k] = nil }
            s.acked.members = s.acked.members.filter { $0.sender != sender }
            for (id, c) in s.connections where c.sender == sender { s.connections[id] = nil }
            s.connectionOrder.removeAll { s.connections[$0] == nil }
        }
    }

    /// Findings so far, plus those that only time reveals (ACKs and reconnections still missing past
    /// their grace), judged now.
    public func findings(sender: String? = nil) -> [AuditFinding] {
        let at = now()
        return state.withLock { s in
            var out = s.findings.filter { sender == nil || $0.sender == sender }
            for id in s.connectionOrder {
                guard let c = s.connections[id], c.closedAt == nil, sender == nil || c.sender == sender else { continue }
                for (messageID, sent) in c.outbound where at - sent.at > limits.ackGraceMillis {
                    out.append(AuditFinding(rule: sent.receipt ? .ackReceipts : .ackUpstream, sender: c.sender, connection: id, at: at,
                                            text: "\(sent.receipt ? "receipt" : "upstream message") \(messageID) not ACKed after \(at - sent.at) ms",
                                            evidence: [AuditEvidence(at: sent.at, what: "sent to the app server", messageID: messageID, connection: id)]))
                }
            }
            for (name, snd) in s.senders where sender == nil || name == sender {
                for d in snd.drains where at - d.at > limits.reconnectGraceMillis {
                    out.append(AuditFinding(rule: .drainReconnect, sender: name, connection: d.connection, at: at,
                                            text: "no new connection \(at - d.at) ms after CONNECTION_DRAINING",
                                            evidence: [AuditEvidence(at: d.at, what: "CONNECTION_DRAINING sent", connection: d.connection)]))
                }
            }
            return out.sorted { $0.at < $1.at }
        }
    }

    /// `GET /emulator/v1/audit`: per sender the rules kept and broken, the findings, and the connections.
    public func report(sender: String? = nil) -> JSONValue {
        let findings = findings(sender: sender)
        return state.withLock { s in
            var senders: [JSONValue] = []
            for name in s.senders.keys.sorted() where sender == nil || name == sender {
                let snd = s.senders[name]!
                let mine = findings.filter { $0.sender == name }
                var rules: [String: JSONValue] = [:]
                for rule in AuditRule.allCases {
                    // Recorded ones (counted even when the finding list was full) plus those judged now.
                    let judgedNow = mine.filter { $0.rule == rule }.count
                        - s.findings.filter { $0.sender == name && $0.rule == rule }.count
                    let broken = (snd.broken[rule] ?? 0) + judgedNow
                    rules[rule.rawValue] = .object(["kept": .int(Int64(snd.kept[rule] ?? 0)), "broken": .int(Int64(broken))])
                }
                senders.append(.object(["sender": .string(name), "clean": .bool(mine.isEmpty), "rules": .object(rules),
                                        "findings": .array(mine.map(\.json))]))
            }
            var connections: [JSONValue] = []
            for id in s.connectionOrder {
                guard let c = s.connections[id], sender == nil || c.sender == sender else { continue }
                var o: [String: JSONValue] = ["id": .string(id), "sender": .string(c.sender), "opened_at": .int(c.openedAt),
                                              "pending": .int(Int64(c.pendingCount)),
                                              "unacked_outbound": .int(Int64(c.outbound.count)),
                                              "findings": .int(Int64(findings.filter { $0.connection == id }.count))]
                if let t = c.closedAt { o["closed_at"] = .int(t) }
                if let t = c.drainedAt { o["drained_at"] = .int(t) }
                connections.append(.object(o))
            }
            return .object(["clean": .bool(findings.isEmpty),
                            "rules": .array(AuditRule.allCases.map { .object(["id": .string($0.rawValue), "title": .string($0.title),
                                                                               "source": .string($0.source),
                                                                               "http_source": .string($0.httpSource)]) }),
                            "senders": .array(senders), "connections": .array(connections),
                            "findings_dropped": .int(Int64(s.findingsDropped))])
        }
    }
}

extension AuditFinding {
    public var json: JSONValue {
        var o: [String: JSONValue] = ["rule": .string(rule.rawValue), "sender": .string(sender), "at": .int(at),
                                      "text": .string(text), "source": .string(source),
                                      "evidence": .array(evidence.map(\.json))]
        if let connection { o["connection"] = .string(connection) }
        return .object(o)
    }
}

extension AuditEvidence {
    public var json: JSONValue {
        var o: [String: JSONValue] = ["at": .int(at), "what": .string(what)]
        if let messageID { o["message_id"] = .string(messageID) }
        if let connection { o["connection"] = .string(connection) }
        return .object(o)
    }
}

/// A set that forgets its oldest members past a limit.
struct BoundedSet<Element: Hashable> {
    var members: Set<Element> = []
    var order: [Element] = []
    var start = 0

    func contains(_ e: Element) -> Bool { members.contains(e) }

    mutating func insert(_ e: Element, limit: Int) {
        guard members.insert(e).inserted else { return }
        order.append(e)
        if members.count > limit {
            members.remove(order[start])
            start += 1
            if start > 4096, start * 2 > order.count {
                order.removeFirst(start)
                start = 0
            }
        }
    }
}
