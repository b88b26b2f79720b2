import CCSEngine
import CCSProtocol
import PushDomain
import FaultInjection
import NIOCore
import XMLStreaming

/// Port 5235: what an authenticated app server's stanzas mean (spec §2–§4).
extension XMPPConnectionHandler {
    func appServerStanza(_ stanza: XMLElement) {
        guard stanza.name == "message", let gcm = stanza.firstChild(named: "gcm", namespace: NS.gcm) else {
            return // CCS gives no meaning to other stanzas
        }
        switch AppServerStanzaDecoder.decode(gcm.text) {
        case .failure(.stanzaError(let description)):
            write(stanzaError(echoing: stanza, gcmText: gcm.text, description: description))
            if let link {
                engine.report(appServer: .downstreamAnswered(connection: link.id, messageID: stanza.attribute("id") ?? "", to: nil,
                                                             answer: .stanzaError(description)))
            }
        case .failure(.nack(let nack)):
            appendGCM(OutgoingJSON.nack(nack))
            if let link {
                engine.recordRefused(api: .ccs, sender: principal, token: nack.from, connection: link.id,
                                      clientMessageID: nack.messageID.isEmpty ? nil : nack.messageID,
                                      detail: "NACK \(nack.code.rawValue)")
                engine.report(appServer: .downstreamAnswered(connection: link.id, messageID: nack.messageID, to: nack.from,
                                                             answer: .nack(code: nack.code.rawValue)))
            }
        case .success(.ack(let messageID, let to)):
            if let link {
                engine.report(appServer: .outboundAcknowledged(connection: link.id, messageID: messageID))
                engine.appServerAcknowledged(connectionID: link.id, messageID: messageID, to: to)
            }
        case .success(.nack):
            break // app servers never NACK (spec §5.1); there is nothing to undo
        case .success(.downstream(let message)):
            downstream(message)
        }
    }

    /// What injected faults ask of one downstream message's answer (docs/conformance.md).
    private struct AnswerPlan {
        var delayMillis: Int?
        var drop = false
        var drain = false
    }

    private func downstream(_ message: DownstreamMessage) {
        guard let link, let sender = principal else { return }
        let messageID = message.messageID
        let addressee = message.to ?? message.condition
        let engine = self.engine
        engine.report(appServer: .downstreamReceived(connection: link.id, messageID: messageID, to: addressee))
        if link.isDraining {
            refuse(message, link: link, sender: sender, .connectionDraining, "Connection is draining")
            return
        }
        guard let plan = faultPlan(message, link: link, sender: sender) else { return }
        if link.pendingCount >= configuration.maxPendingDownstream {
            switch configuration.overLimitPolicy {
            case .accept:
                break
            case .nack:
                refuse(message, link: link, sender: sender, .serviceUnavailable,
                       "More than \(configuration.maxPendingDownstream) messages pending on this connection")
                return
            case .close:
                perform(negotiation.streamError("policy-violation",
                                                text: "More than \(configuration.maxPendingDownstream) messages pending"))
                return
            }
        }
        link.pending.add(1, ordering: .relaxed)
        let request = SendRequest(sender: sender, target: message.canonicalTarget, message: message.canonical,
                                  origin: SendOrigin(api: .ccs, connection: link.id, clientMessageID: messageID))
        engine.send(request) { results in
            engine.recordAnswers(request, results) { "NACK " + Nack(messageID: messageID, from: addressee, refusal: $0).code.rawValue }
            link.mailbox.post {
                guard let result = results.first else {
                    link.pending.subtract(1, ordering: .relaxed)
                    return
                }
                Self.answer(result, messageID: messageID, addressee: addressee, link: link, engine: engine, plan: plan)
            }
        }
    }

    /// NACKs a downstream message before the engine saw it, and tells the audit and the journal.
    private func refuse(_ message: DownstreamMessage, link: ConnectionLink, sender: String, _ code: NackCode, _ description: String) {
        let addressee = message.to ?? message.condition
        appendGCM(OutgoingJSON.nack(Nack(messageID: message.messageID, from: addressee, code: code, description: description)))
        engine.report(appServer: .downstreamAnswered(connection: link.id, messageID: message.messageID, to: addressee,
                                                     answer: .nack(code: code.rawValue)))
        engine.recordRefused(api: .ccs, sender: sender, token: message.to, connection: link.id,
                             clientMessageID: message.messageID, detail: "NACK \(code.rawValue)")
    }

    /// The injected faults for this message: nil when one already answered it (a NACK, a close);
    /// else how its answer is to be delayed, dropped or followed by draining. One atomic load when
    /// no rule acts here.
    private func faultPlan(_ message: DownstreamMessage, link: ConnectionLink, sender: String) -> AnswerPlan? {
        var plan = AnswerPlan()
        for action in engine.intercept(.ccsDownstream, FaultSubject(
            sender: sender, token: message.to.flatMap { $0.hasPrefix("/topics/") ? nil : $0 },
            topic: message.to.flatMap { $0.hasPrefix("/topics/") ? $0 : nil }, messageID: message.messageID,
            origin: "ccs:\(link.id)")) {
            switch action {
            case .nack(let code, let description):
                refuse(message, link: link, sender: sender, code, description ?? code.defaultDescription)
                return nil
            case .closeConnection:
                perform(negotiation.serverClosing())
                return nil
            case .delayAck(let millis): plan.delayMillis = millis
            case .dropAck: plan.drop = true
            case .drain: plan.drain = true
            default: break
            }
        }
        return plan
    }

    /// The ACK or NACK of one send result, with the audit's view of it and the canonical
    /// registration id an ACK names (sent to an earlier token of a refreshed installation).
    static func rendered(_ result: SendResult, messageID: String, addressee: String?)
        -> (answer: String, audited: AppServerEvent.Answer, canonical: String?) {
        switch result {
        case .accepted(let token, _, let canonical):
            return (OutgoingJSON.ack(messageID: messageID, from: token, registrationID: canonical), .ack, canonical)
        case .fannedOut:
            // A topic or condition send: the ACK's `from` is the topic or the condition (docs/semantics.md).
            return (OutgoingJSON.ack(messageID: messageID, from: addressee), .ack, nil)
        case .refused(let error):
            let nack = Nack(messageID: messageID, from: addressee, refusal: error)
            return (OutgoingJSON.nack(nack), .nack(code: nack.code.rawValue), nil)
        case .group(let outcome) where outcome.allFailed:
            let nack = Nack(messageID: messageID, groupOutcome: outcome)
            let answer = OutgoingJSON.deviceGroupNack(nack, success: outcome.success, failure: outcome.failure,
                                                      failedRegistrationIDs: outcome.failedRegistrationIDs)
            return (answer, .nack(code: nack.code.rawValue), nil)
        case .group(let outcome):
            // At least one member took it, or the group is empty: an ACK with the counts.
            let answer = OutgoingJSON.deviceGroupAck(messageID: messageID, from: outcome.notificationKey,
                                                     success: outcome.success, failure: outcome.failure,
                                                     failedRegistrationIDs: outcome.failedRegistrationIDs)
            return (answer, .ack, nil)
        }
    }

    /// Writes the answer on the connection's loop (now, or after an injected delay).
    private static func answer(_ result: SendResult, messageID: String, addressee: String?, link: ConnectionLink, engine: Engine,
                               plan: AnswerPlan) {
        let (answer, audited, canonical) = rendered(result, messageID: messageID, addressee: addressee)
        let deliver: @Sendable () -> Void = {
            // Counted down on the loop, with the answer written: shutdown waits for pending = 0.
            link.pending.subtract(1, ordering: .relaxed)
            guard let handler = link.handler.value.handler else { return }
            if !plan.drop {
                handler.writeGCM(answer)
                engine.report(appServer: .downstreamAnswered(connection: link.id, messageID: messageID, to: addressee,
                                                             answer: audited, canonical: canonical))
            }
            if plan.drain { handler.startDraining() }
            if link.pendingCount == 0 { handler.finishPeerEndedStream() }
        }
        if let delay = plan.delayMillis, let loop = link.handler.value.handler?.context?.eventLoop {
            loop.scheduleTask(in: .milliseconds(Int64(delay))) { deliver() }
        } else {
            deliver()
        }
    }

    /// Upstream messages and receipts: `type="normal"` from `devices@gcm.googleapis.com`, attributes in
    /// the order the PHP client's regular expression expects (spec §5.1).
    func sendToAppServer(_ messages: [OutboundMessage]) {
        let bare = negotiation.boundJID.map { String($0.split(separator: "/", maxSplits: 1)[0]) }
            ?? "\(principal ?? "")@gcm.googleapis.com"
        let head = "<message to=\"\(XMLEscaping.escapeAttribute(bare))\" from=\"devices@gcm.googleapis.com\" type=\"normal\"><gcm xmlns=\"google:mobile:data\">"
        for m in messages {
            writeAndScheduleFlush(head + XMLEscaping.escapeText(m.json) + "</gcm></message>")
            if let link {
                engine.report(appServer: .outboundSent(connection: link.id, messageID: m.messageID,
                                                       receipt: m.messageID.hasPrefix(DeliveryReceipt.messageIDPrefix)))
            }
        }
    }

    /// `<message><gcm …>json</gcm></message>` (ACK, NACK, `sent` answers) straight into the pending
    /// output; flushed at the end of the read that caused it.
    func appendGCM(_ json: String) {
        guard context != nil, !closing else { return }
        withOutput { out in
            out.writeStaticString("<message><gcm xmlns=\"google:mobile:data\">")
            out.writeString(XMLEscaping.escapeText(json))
            out.writeStaticString("</gcm></message>")
        }
    }

    /// `appendGCM` for answers that do not come from a read: flushed with the mailbox's batch.
    func writeGCM(_ json: String) {
        appendGCM(json)
        mailbox.needsFlush(self)
    }

    /// Spec §3.4: echoes the id and the payload; `to` is the client's full JID.
    func stanzaError(echoing stanza: XMLElement, gcmText: String, description: String) -> String {
        var head = "<message"
        if let id = stanza.attribute("id") { head += " id=\"\(XMLEscaping.escapeAttribute(id))\"" }
        head += " type=\"error\""
        if let jid = negotiation.boundJID { head += " to=\"\(XMLEscaping.escapeAttribute(jid))\"" }
        return head + "><gcm xmlns=\"google:mobile:data\">\(XMLEscaping.escapeText(gcmText))</gcm>"
            + "<error code=\"400\" type=\"modify\"><bad-request xmlns=\"\(NS.stanzas)\"/>"
            + "<text xmlns=\"\(NS.stanzas)\">\(XMLEscaping.escapeText(description))</text></error></message>"
    }

    func startDraining() {
        guard role == .appServer, let link, let context, !closing, !link.isDraining else { return }
        link.draining.store(true, ordering: .relaxed)
        engine.connectionDraining(id: link.id)
        engine.report(appServer: .drained(connection: link.id))
        writeAndScheduleFlush("<message><data:gcm xmlns:data=\"google:mobile:data\">\(OutgoingJSON.connectionDraining)</data:gcm></message>")
        let bound = link.handler
        drainClose = context.eventLoop.scheduleTask(in: configuration.drainGracePeriod) {
            guard let handler = bound.value.handler else { return }
            handler.perform(handler.negotiation.serverClosing())
        }
    }
}
