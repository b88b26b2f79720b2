import DeliveryCore
import CCSEngine
import CCSProtocol
import PushDomain
import StoreModel
import NIOCore
import XMLStreaming

/// Port 5228: the device channel (docs/device-protocol.md).
extension XMPPConnectionHandler {
    func deviceStanza(_ stanza: XMLElement) {
        guard let token = principal else { return }
        guard stanza.name == "message", let gcm = stanza.firstChild(named: "gcm", namespace: NS.gcm) else { return }
        guard case .object(let json)? = try? JSONValue.parse(gcm.text) else {
            write(deviceError(stanza, condition: "bad-request", text: "expected a JSON object"))
            return
        }
        guard case .string(let type)? = json["message_type"] else {
            // No message_type: an upstream message for an app server.
            guard let link else { return }
            switch DeviceUpstream.request(from: json) {
            case .success(let request):
                engine.upstream(from: token, request) { outcome in link.answerUpstream(outcome) }
            case .failure(let refused):
                link.answerUpstream(.sendError(messageID: refused.messageID, error: refused.error))
            }
            return
        }
        switch type.lowercased() {
        case "ack":
            guard case .string(let id)? = json["message_id"] else {
                write(deviceError(stanza, condition: "bad-request", text: "ack without \"message_id\""))
                return
            }
            engine.deviceAcknowledged(token: token, deviceMessageID: id)
        case "views":
            // The platform views on this connection: on by default, off for devices that only ACK.
            guard case .bool(let enabled)? = json["enabled"] else {
                write(deviceError(stanza, condition: "bad-request", text: "views without a boolean \"enabled\""))
                return
            }
            link?.views.store(enabled, ordering: .relaxed)
        default:
            write(deviceError(stanza, condition: "feature-not-implemented",
                              text: "message_type \"\(type)\" is not supported on the device channel"))
        }
    }

    private func deviceError(_ stanza: XMLElement, condition: String, text: String) -> String {
        var head = "<message"
        if let id = stanza.attribute("id") { head += " id=\"\(XMLEscaping.escapeAttribute(id))\"" }
        return head + " type=\"error\"><error type=\"modify\"><\(condition) xmlns=\"\(NS.stanzas)\"/>"
            + "<text xmlns=\"\(NS.stanzas)\">\(XMLEscaping.escapeText(text))</text></error></message>"
    }

    /// Each message as `<message id="ACK-ID"><gcm …>payload</gcm><view …>platform view</view></message>`;
    /// a notification the system shows in the tray (app in the background) carries
    /// `<tray xmlns="urn:ccs-emulator:device"/>`; the service's notices have no view.
    func deliverToDevice(_ deliveries: [DeviceDelivery]) {
        guard context != nil, !closing else { return }
        withOutput { out in
            for d in deliveries {
                out.writeStaticString("<message id=\"")
                out.writeString(XMLEscaping.escapeAttribute(d.message.deviceMessageID))
                out.writeStaticString("\"><gcm xmlns=\"google:mobile:data\">")
                out.writeString(XMLEscaping.escapeText(d.message.payload))
                out.writeStaticString("</gcm>")
                if let view = d.view {
                    out.writeStaticString("<view xmlns=\"urn:ccs-emulator:device\">")
                    out.writeString(XMLEscaping.escapeText(view))
                    out.writeStaticString("</view>")
                }
                out.writeStaticString(d.toTray ? "<tray xmlns=\"urn:ccs-emulator:device\"/></message>" : "</message>")
            }
        }
        mailbox.needsFlush(self)
    }
}
