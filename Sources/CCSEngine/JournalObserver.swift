import DeliveryCore
import FaultInjection
import Locking
import MessageJournal
import PushDomain
import StoreModel

/// The message journal as an observer of the engine's events (docs/admin-api.md#message-journal):
/// turns each into the journal's events, with the engine's clock.
final class JournalObserver: DeliveryObserver {
    let journal: MessageJournal
    let now: @Sendable () -> Int64
    /// Messages the store dropped as they arrived (the 100-message limit): their commit is no `stored`.
    private let droppedOnArrival = Locked<Set<String>>([])
    /// Removals of a transaction, journaled after its completions: a message written and dropped in
    /// one transaction then reads `stored`, `accepted`, `discarded`, in that order.
    private let removals = Locked<[QueueRemoval]>([])

    init(journal: MessageJournal, now: @escaping @Sendable () -> Int64) {
        self.journal = journal
        self.now = now
    }

    func observe(_ event: DeliveryEvent) {
        switch event {
        case .answered(let request, let results, let refusals): answered(request, results, refusals)
        case .refusedAtEdge(let r):
            journal.record(JournalEvent(at: now(), kind: .refused, messageID: journal.makeMessageID(), sender: r.sender, token: r.token,
                                        topic: r.topic, api: r.api, connection: r.connection, clientMessageID: r.clientMessageID,
                                        detail: r.detail))
        case .message(let step, let m, let token, let detail): message(step, m, token: token, detail: detail)
        case .receipt(let step, let about, let sender, let token, let connection):
            journal.record(JournalEvent(at: now(), kind: step == .sent ? .receiptSent : .receiptAcked, messageID: about,
                                        sender: sender, token: token, connection: connection))
        case .tapped(let id, let token):
            journal.record(JournalEvent(at: now(), kind: .tapped, messageID: id, sender: nil, token: token))
        case .fannedOut(let m, let topic, let devices):
            journal.record(JournalEvent(at: now(), kind: .fannedOut, messageID: m.deviceMessageID, sender: m.senderID, topic: topic,
                                        detail: "\(devices) devices"))
        case .handedOver(let deliveries, _):
            for d in deliveries { message(.handedOver, d.message, token: nil, detail: nil) }
        case .removed(let removed):
            // After the commit, before its completions: a message dropped on arrival must not read
            // `stored`; every removal is journaled after the completions (`batchEnded`).
            for r in removed where r.onArrival { droppedOnArrival.withLock { _ = $0.insert(r.deviceMessageID) } }
            removals.withLock { $0 += removed }
        case .batchEnded: journalRemovals()
        case .faultApplied(let entry): fault(entry)
        case .outboundSent, .sendTook, .committed, .appServer, .apns: break
        }
    }

    private func message(_ step: DeliveryEvent.MessageStep, _ m: QueuedMessage, token: String?, detail: String?) {
        guard m.kind == .message || m.kind == .apnsNotification else { return }
        if step == .stored, droppedOnArrival.withLock({ $0.remove(m.deviceMessageID) }) != nil { return }
        let kind: JournalEventKind
        switch step {
        case .stored: kind = .stored
        case .throttled: kind = .throttled
        case .handedOver: kind = .handedOver
        case .deviceAcked: kind = .deviceAcked
        case .shownInTray: kind = .shownInTray
        }
        journal.record(JournalEvent(at: now(), kind: kind, messageID: m.deviceMessageID, sender: m.senderID,
                                    token: token ?? (m.token.isEmpty ? nil : m.token), detail: detail))
    }

    /// One `accepted`, `not_stored` or `refused` event per result.
    private func answered(_ request: SendRequest, _ results: [SendResult], _ refusals: [String?]) {
        let at = now()
        let o = request.origin
        var topic: String?
        var tokens: [String] = []
        switch request.target {
        case .token(let t): tokens = [t]
        case .tokens(let ts): tokens = ts
        case .topic(let name): topic = TopicName.prefix + name
        case .condition(let condition): topic = condition
        case .group(let key): tokens = [key]
        case .apnsDeviceToken: break
        }
        for (index, result) in results.enumerated() {
            var e = JournalEvent(at: at, kind: .accepted, messageID: "", sender: request.sender, topic: topic,
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
            case .refused:
                e.kind = .refused
                e.token = index < tokens.count ? tokens[index] : nil
                e.messageID = journal.makeMessageID()
                e.detail = index < refusals.count ? refusals[index] : nil
            case .group(let outcome):
                e.token = outcome.notificationKey
                e.messageID = journal.makeMessageID()
                e.kind = outcome.allFailed ? .refused : .accepted
                e.detail = "device group: \(outcome.success) delivered, \(outcome.failure) failed"
            }
            journal.record(e)
        }
    }

    private func journalRemovals() {
        let taken = removals.withLock { r -> [QueueRemoval] in
            defer { r.removeAll() }
            return r
        }
        if taken.isEmpty { return }
        let at = now()
        for r in taken {
            let kind: JournalEventKind
            switch r.reason {
            case .collapsed: kind = .collapsed
            case .discarded: kind = .discarded
            case .expired: kind = .expired
            }
            journal.record(JournalEvent(at: at, kind: kind, messageID: r.deviceMessageID, sender: r.senderID, token: r.token,
                                        detail: r.onArrival ? "dropped on arrival: the device already holds the most messages" : nil))
        }
    }

    /// A device-side fault names the message by its FCM id; a front end's, by the id its client chose
    /// (found through `client_message_id`).
    private func fault(_ entry: FaultLogEntry) {
        let s = entry.subject
        let onDevice = s.origin.hasPrefix("device:")
        journal.record(JournalEvent(at: now(), kind: .faultApplied,
                                    messageID: onDevice ? (s.messageID ?? journal.makeMessageID()) : journal.makeMessageID(),
                                    sender: s.sender, token: s.token, topic: s.topic,
                                    connection: s.origin, clientMessageID: onDevice ? nil : s.messageID,
                                    detail: "rule \(entry.ruleID): \(entry.action)"))
    }
}
