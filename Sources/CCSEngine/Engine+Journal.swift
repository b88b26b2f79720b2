import PushDomain
import StoreModel
import FaultInjection
import MessageJournal

/// What the engine tells the message journal (docs/admin-api.md#message-journal). Every call is a
/// no-op when the journal is off (`--journal off`).
extension Engine {
    /// The front ends' answers to a send request: one `accepted`, `not_stored` or `refused` event per
    /// result. `refusal` renders a refusal in the front end's own words (a NACK code, an HTTP error).
    public func recordAnswers(_ request: SendRequest, _ results: [SendResult], refusal: (SendError) -> String) {
        if let metrics {
            for result in results {
                switch result {
                case .accepted(_, nil, _): metrics.answered(api: request.origin.api, outcome: .notStored)
                case .fannedOut where request.message.dryRun: metrics.answered(api: request.origin.api, outcome: .notStored)
                case .accepted, .fannedOut: metrics.answered(api: request.origin.api, outcome: .accepted)
                case .refused(let error):
                    metrics.answered(api: request.origin.api, outcome: .refused, code: Self.metricCode(refusal(error)))
                case .group(let outcome):
                    metrics.answered(api: request.origin.api, outcome: outcome.allFailed ? .refused : .accepted,
                                     code: outcome.allFailed ? "device group: every member failed" : "")
                }
            }
        }
        guard let journal else { return }
        let now = clock.nowMillis()
        let o = request.origin
        var topic: String?
        var tokens: [String] = []
        switch request.target {
        case .token(let t): tokens = [t]
        case .tokens(let ts): tokens = ts
        case .topic(let name): topic = TopicName.prefix + name
        case .condition(let condition): topic = condition
        case .group(let key): topic = nil; tokens = [key]
        case .apnsDeviceToken: break
        }
        for (index, result) in results.enumerated() {
            var e = JournalEvent(at: now, kind: .accepted, messageID: "", sender: request.sender, topic: topic,
                                 api: o.api, connection: o.connection, clientMessageID: o.clientMessageID)
            switch result {
            case .accepted(let token, let id?, _):
                e.token = token
                e.messageID = id
            case .accepted(let token, nil, _):
                e.token = token
                e.kind = .notStored
                e.messageID = journal.makeMessageID()
                e.detail = request.message.dryRun ? "dry run" : "time_to_live 0 and the device could not take it now"
            case .fannedOut(let micros):
                e.messageID = DeviceMessageID.make(micros: micros, senderHash: DeviceMessageID.senderHash(request.sender))
                if request.message.dryRun {
                    e.kind = .notStored
                    e.detail = "dry run"
                }
            case .refused(let error):
                e.kind = .refused
                e.token = index < tokens.count ? tokens[index] : nil
                e.messageID = journal.makeMessageID()
                e.detail = refusal(error)
            case .group(let outcome):
                e.token = outcome.notificationKey
                e.messageID = journal.makeMessageID()
                e.kind = outcome.allFailed ? .refused : .accepted
                e.detail = "device group: \(outcome.success) delivered, \(outcome.failure) failed"
            }
            journal.record(e)
        }
    }

    /// A message a front end refused before it reached the engine (bad JSON, a draining connection,
    /// a malformed request).
    public func recordRefused(api: SendAPI, sender: String?, token: String? = nil, topic: String? = nil,
                               connection: String? = nil, clientMessageID: String? = nil, detail: String) {
        metrics?.answered(api: api, outcome: .refused, code: Self.metricCode(detail))
        guard let journal else { return }
        journal.record(JournalEvent(at: clock.nowMillis(), kind: .refused, messageID: journal.makeMessageID(),
                                    sender: sender, token: token, topic: topic, api: api, connection: connection,
                                    clientMessageID: clientMessageID, detail: detail))
    }

    /// A refusal's code as a metric label: the code alone (`BAD_REGISTRATION`, `InvalidRegistration`,
    /// `UNREGISTERED`, a Web Push status), not the journal's wording around it (`NACK …`, `Error=…`,
    /// `HTTP 404 …`, `Web Push 400: …`).
    static func metricCode(_ detail: String) -> String {
        var d = Substring(detail)
        // Web Push's "Web Push 400: <reason>": the status is the code.
        if d.hasPrefix("Web Push ") { return String(d.dropFirst(9).prefix { $0 != ":" }) }
        if d.hasPrefix("Error=") { d = d.dropFirst(6) }
        if let space = d.lastIndex(of: " "), d.hasPrefix("NACK ") || d.hasPrefix("HTTP ") { d = d[d.index(after: space)...] }
        return String(d)
    }

    /// One event of a stored message's life.
    func journal(_ kind: JournalEventKind, _ m: QueuedMessage, token: String? = nil, connection: String? = nil,
                 detail: String? = nil) {
        guard let journal, m.kind == .message || m.kind == .apnsNotification else { return }
        if kind == .stored, droppedOnArrival.withLock({ $0.remove(m.deviceMessageID) }) != nil { return }
        journal.record(JournalEvent(at: clock.nowMillis(), kind: kind, messageID: m.deviceMessageID, sender: m.senderID,
                                    token: token ?? (m.token.isEmpty ? nil : m.token), connection: connection,
                                    detail: detail))
    }

    func journal(_ kind: JournalEventKind, messageID: String, sender: String?, token: String?,
                 connection: String? = nil, detail: String? = nil) {
        guard let journal else { return }
        journal.record(JournalEvent(at: clock.nowMillis(), kind: kind, messageID: messageID, sender: sender, token: token,
                                    connection: connection, detail: detail))
    }

    /// Wires the store's removals (collapse, the limits, expiry) and applied faults into the journal.
    func connectJournal() {
        guard let journal else { return }
        let clock = self.clock
        // Weak: the store outlives nothing of the engine's, and must not keep it alive.
        committer.store.observeRemovals { [weak self] removals in
            guard let self else { return }
            // Called after the commit, before its completions: a message dropped on arrival must not
            // read `stored`; every removal is journaled after the completions (`afterEachBatch`).
            for r in removals where r.onArrival { droppedOnArrival.withLock { _ = $0.insert(r.deviceMessageID) } }
            removalsToJournal.withLock { $0 += removals }
        }
        committer.afterEachBatch { [weak self] in
            guard let self else { return }
            let removals = removalsToJournal.withLock { r -> [QueueRemoval] in
                defer { r.removeAll() }
                return r
            }
            if removals.isEmpty { return }
            let now = clock.nowMillis()
            for r in removals {
                let kind: JournalEventKind
                switch r.reason {
                case .collapsed: kind = .collapsed
                case .discarded: kind = .discarded
                case .expired: kind = .expired
                }
                journal.record(JournalEvent(at: now, kind: kind, messageID: r.deviceMessageID, sender: r.senderID, token: r.token,
                                            detail: r.onArrival ? "dropped on arrival: the device already holds the most messages" : nil))
            }
        }
    }

    /// A fault rule acted (the injector's log entry, also in the journal).
    static func journalFault(_ entry: FaultLogEntry, journal: MessageJournal?, now: Int64) {
        guard let journal else { return }
        let s = entry.subject
        // A device-side fault names the message by its FCM id; a front end's, by the id its client chose
        // (found through `client_message_id`).
        let onDevice = s.origin.hasPrefix("device:")
        journal.record(JournalEvent(at: now, kind: .faultApplied,
                                    messageID: onDevice ? (s.messageID ?? journal.makeMessageID()) : journal.makeMessageID(),
                                    sender: s.sender, token: s.token, topic: s.topic,
                                    connection: s.origin, clientMessageID: onDevice ? nil : s.messageID,
                                    detail: "rule \(entry.ruleID): \(entry.action)"))
    }
}
