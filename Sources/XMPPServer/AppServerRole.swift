import CCSEngine
import CCSProtocol
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
        case .failure(.nack(let nack)):
            appendGCM(OutgoingJSON.nack(nack))
        case .success(.ack(let messageID, let to)):
            if let link { engine.appServerAcknowledged(connectionID: link.id, messageID: messageID, to: to) }
        case .success(.nack):
            break // app servers never NACK (spec §5.1); there is nothing to undo
        case .success(.downstream(let message)):
            downstream(message)
        }
    }

    private func downstream(_ message: DownstreamMessage) {
        guard let link, let sender = principal else { return }
        if link.isDraining {
            appendGCM(OutgoingJSON.nack(Nack(messageID: message.messageID, from: message.to ?? message.condition,
                                  code: .connectionDraining, description: "Connection is draining")))
            return
        }
        if link.pendingCount >= configuration.maxPendingDownstream {
            switch configuration.overLimitPolicy {
            case .accept:
                break
            case .nack:
                appendGCM(OutgoingJSON.nack(Nack(messageID: message.messageID, from: message.to ?? message.condition,
                                      code: .serviceUnavailable,
                                      description: "More than \(configuration.maxPendingDownstream) messages pending on this connection")))
                return
            case .close:
                perform(negotiation.streamError("policy-violation",
                                                text: "More than \(configuration.maxPendingDownstream) messages pending"))
                return
            }
        }
        link.pending.add(1, ordering: .relaxed)
        let messageID = message.messageID
        let addressee = message.to ?? message.condition
        engine.send(SendRequest(sender: sender, target: message.canonicalTarget, message: message.canonical)) { results in
            link.mailbox.post {
                // Counted down on the loop, with the answer written: shutdown waits for pending = 0.
                link.pending.subtract(1, ordering: .relaxed)
                guard let handler = link.handler.value.handler, let result = results.first else { return }
                switch result {
                case .accepted(let token, _):
                    handler.writeGCM(OutgoingJSON.ack(messageID: messageID, from: token))
                case .fannedOut:
                    // A topic or condition send: the ACK's `from` is the topic or the condition (docs/semantics.md).
                    handler.writeGCM(OutgoingJSON.ack(messageID: messageID, from: addressee))
                case .refused(let error):
                    handler.writeGCM(OutgoingJSON.nack(Nack(messageID: messageID, from: addressee, refusal: error)))
                case .group(let outcome) where outcome.allFailed:
                    handler.writeGCM(OutgoingJSON.deviceGroupNack(Nack(messageID: messageID, groupOutcome: outcome),
                                                                  success: outcome.success, failure: outcome.failure,
                                                                  failedRegistrationIDs: outcome.failedRegistrationIDs))
                case .group(let outcome):
                    // At least one member took it, or the group is empty: an ACK with the counts.
                    handler.writeGCM(OutgoingJSON.deviceGroupAck(messageID: messageID, from: outcome.notificationKey,
                                                                 success: outcome.success, failure: outcome.failure,
                                                                 failedRegistrationIDs: outcome.failedRegistrationIDs))
                }
                if link.pendingCount == 0 { handler.finishPeerEndedStream() }
            }
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
        writeAndScheduleFlush("<message><data:gcm xmlns:data=\"google:mobile:data\">\(OutgoingJSON.connectionDraining)</data:gcm></message>")
        let bound = link.handler
        drainClose = context.eventLoop.scheduleTask(in: configuration.drainGracePeriod) {
            guard let handler = bound.value.handler else { return }
            handler.perform(handler.negotiation.serverClosing())
        }
    }
}
