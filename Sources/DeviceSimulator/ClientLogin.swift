import Foundation
import XMLStreaming

/// The client side of an XMPP login, shared by the simulated device and the app-server client of
/// `ccs-emulator send`: stream header, SASL PLAIN, stream restart, resource bind; then answers to
/// pings and stream errors. A value-type state machine: it takes one stanza and returns what to do.
struct ClientLogin {
    enum Phase { case opening, authenticating, restarting, binding, connected }

    enum Action: Equatable {
        case send(String)
        /// The resource is bound: stanzas flow from now on.
        case connected
        /// SASL refused the credentials; the server's condition and text.
        case refused(String)
        /// The session cannot go on; close with this reason.
        case fail(String)
        /// A stanza of the established session, for the role to interpret.
        case stanza(XMLElement)
    }

    /// The stream's `to`.
    let domain: String
    /// `authzid \0 authcid \0 password`, before base64.
    let plain: String
    /// The resource asked for in the bind (nil: the server picks one).
    let resource: String?
    private(set) var phase = Phase.opening

    init(domain: String, plain: String, resource: String?) {
        self.domain = domain
        self.plain = plain
        self.resource = resource
    }

    var streamHeader: String {
        "<stream:stream to=\"\(domain)\" version=\"1.0\" xmlns=\"jabber:client\" xmlns:stream=\"http://etherx.jabber.org/streams\">"
    }

    /// After `<success/>` the server's next bytes belong to a new document: the parser pauses there.
    static func pausesParser(after element: XMLElement) -> Bool { element.name == "success" }

    mutating func received(_ stanza: XMLElement) -> [Action] {
        switch (stanza.name, phase) {
        case ("features", .opening):
            phase = .authenticating
            let payload = Data(plain.utf8).base64EncodedString()
            return [.send("<auth xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\" mechanism=\"PLAIN\">\(payload)</auth>")]
        case ("success", .authenticating):
            phase = .restarting
            return [.send(streamHeader)]
        case ("failure", _):
            return [.refused(Self.describe(stanza))]
        case ("features", .restarting):
            phase = .binding
            let inner = resource.map { "<resource>\(XMLEscaping.escapeText($0))</resource>" } ?? ""
            return [.send("<iq type=\"set\" id=\"bind-1\"><bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\">\(inner)</bind></iq>")]
        case ("iq", .binding) where stanza.attribute("id") == "bind-1":
            guard stanza.attribute("type") == "result" else {
                let condition = stanza.firstChild(named: "error")?.childElements.first?.name ?? "unknown"
                return [.fail("resource bind refused: \(condition)")]
            }
            phase = .connected
            return [.connected]
        case ("error", _):
            return [.fail("stream error: \(Self.describe(stanza))")]
        case ("iq", _) where stanza.attribute("type") == "get"
            && stanza.firstChild(named: "ping", namespace: "urn:xmpp:ping") != nil:
            return [.send("<iq type=\"result\" id=\"\(XMLEscaping.escapeAttribute(stanza.attribute("id") ?? ""))\"/>")]
        case (_, .connected):
            return [.stanza(stanza)]
        default:
            return []
        }
    }

    /// "not-authorized (wrong server key …)": an error element's condition and its text, if any.
    static func describe(_ element: XMLElement) -> String {
        let condition = element.childElements.first(where: { $0.name != "text" })?.name ?? "unknown"
        let text = element.firstChild(named: "text")?.text ?? ""
        return condition + (text.isEmpty ? "" : " (\(text))")
    }
}

extension XMLStreamParser {
    /// Parses `bytes`; when the parser paused after SASL `<success/>`, starts the next document, so
    /// that the server's new stream header parses. Events of the old document come first.
    func feedRestarting(_ bytes: UnsafeRawBufferPointer) throws -> [XMLStreamEvent] {
        var events = try feed(bytes)
        while isPaused {
            reset()
            events += try feed([UInt8]())
        }
        return events
    }
}
