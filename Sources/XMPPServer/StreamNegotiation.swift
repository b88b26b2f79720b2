import Foundation
import XMLStreaming

/// The server side of an XMPP client stream up to an established session: stream headers, SASL PLAIN
/// (and X-OAUTH2 with the same payload), stream restart, resource binding, the optional session, and the
/// stanzas every client sends that carry no CCS meaning (presence, roster, pings, other iqs).
///
/// A value-type state machine in the style of swift-nio's protocol handlers: it takes one parser event
/// and returns the actions to carry out; it does no I/O. Everything that is neither negotiation nor
/// housekeeping is handed back as `.stanza` for the role (app server or device) to interpret.
public struct StreamNegotiation: Sendable {
    public enum Phase: Sendable, Equatable {
        case awaitingStream
        case awaitingAuth
        case awaitingRestart
        case authenticated
    }

    public enum Action: Sendable, Equatable {
        case write(String)
        /// Authenticate these credentials (already split); answer with `authenticationSucceeded` / `Failed`.
        case authenticate(SASLCredentials)
        /// Start a new XML document after the current stanza (SASL success).
        case restartParser
        /// Raise the stanza limits (the peer is authenticated).
        case useAuthenticatedLimits
        /// The resource is bound: the session is established if the role accepts it. Write `reply`
        /// (the bind result) if it does, `refusal` followed by a stream error if it does not.
        case bound(jid: String, reply: String, refusal: String)
        /// A stanza for the role to handle.
        case stanza(XMLElement)
        /// Close the connection once everything written so far is flushed.
        case close
    }

    public var phase: Phase = .awaitingStream
    public private(set) var streamID = ""
    /// The `to` the client put in its first stream header; echoed as `from`.
    public private(set) var serviceDomain = "gcm.googleapis.com"
    /// The domain of the JIDs this server hands out.
    public let jidDomain: String
    public private(set) var username: String?
    public private(set) var boundJID: String?
    private var headerSent = false
    private var closed = false

    public init(jidDomain: String = "gcm.googleapis.com") {
        self.jidDomain = jidDomain
    }

    public var isEstablished: Bool { phase == .authenticated && boundJID != nil }
    public var isAuthenticated: Bool { phase == .authenticated }

    // MARK: events

    public mutating func streamOpened(_ header: XMLElement) -> [Action] {
        var actions: [Action] = []
        if phase == .awaitingStream, let to = header.attribute("to"), !to.isEmpty { serviceDomain = to }
        streamID = Self.makeStreamID()
        actions.append(.write(streamHeader()))
        headerSent = true
        if header.name != "stream" || header.namespace != NS.stream {
            return actions + streamError("invalid-namespace")
        }
        switch phase {
        case .awaitingStream, .awaitingAuth:
            phase = .awaitingAuth
            actions.append(.write("<stream:features><mechanisms xmlns=\"\(NS.sasl)\"><mechanism>PLAIN</mechanism><mechanism>X-OAUTH2</mechanism></mechanisms></stream:features>"))
        case .awaitingRestart, .authenticated:
            phase = .authenticated
            actions.append(.write("<stream:features><bind xmlns=\"\(NS.bind)\"/><session xmlns=\"\(NS.session)\"/></stream:features>"))
        }
        return actions
    }

    /// The server ends the stream (draining finished, shutdown, device replaced).
    public mutating func serverClosing() -> [Action] {
        guard !closed else { return [.close] }
        closed = true
        return [.write("</stream:stream>"), .close]
    }

    public mutating func streamClosed() -> [Action] {
        guard !closed else { return [] }
        closed = true
        return [.write("</stream:stream>"), .close]
    }

    public mutating func parseFailed(_ error: XMLStreamError) -> [Action] {
        streamError(error.streamErrorCondition)
    }

    /// A stream-level error: header first if none was sent yet, then the error and the close tag.
    public mutating func streamError(_ condition: String, text: String? = nil) -> [Action] {
        guard !closed else { return [] }
        closed = true
        var out = ""
        if !headerSent {
            streamID = Self.makeStreamID()
            out += streamHeader()
            headerSent = true
        }
        out += "<stream:error><\(condition) xmlns=\"\(NS.streams)\"/>"
        if let text { out += "<text xmlns=\"\(NS.streams)\">\(XMLEscaping.escapeText(text))</text>" }
        out += "</stream:error></stream:stream>"
        return [.write(out), .close]
    }

    public mutating func stanzaReceived(_ stanza: XMLElement) -> [Action] {
        switch phase {
        case .awaitingStream:
            return streamError("not-well-formed")
        case .awaitingAuth:
            if stanza.name == "auth" && stanza.namespace == NS.sasl { return auth(stanza) }
            if stanza.namespace == NS.sasl {
                return [.write("<failure xmlns=\"\(NS.sasl)\"><malformed-request/></failure>")]
            }
            return streamError("not-authorized")
        case .awaitingRestart:
            return streamError("not-authorized")
        case .authenticated:
            return authenticatedStanza(stanza)
        }
    }

    public mutating func authenticationSucceeded(username: String) -> [Action] {
        self.username = username
        phase = .awaitingRestart
        return [.write("<success xmlns=\"\(NS.sasl)\"/>"), .restartParser, .useAuthenticatedLimits]
    }

    /// `text` says why (RFC 6120 §6.5 allows it; ejabberd and Prosody send one too).
    public mutating func authenticationFailed(text: String? = nil) -> [Action] {
        saslFailure("not-authorized", text: text)
    }

    private mutating func saslFailure(_ condition: String, text: String? = nil) -> [Action] {
        closed = true
        var failure = "<failure xmlns=\"\(NS.sasl)\"><\(condition)/>"
        if let text { failure += "<text xml:lang=\"en\">\(XMLEscaping.escapeText(text))</text>" }
        return [.write(failure + "</failure></stream:stream>"), .close]
    }

    // MARK: SASL

    private mutating func auth(_ stanza: XMLElement) -> [Action] {
        let mechanism = stanza.attribute("mechanism") ?? ""
        // CCS clients never retry SASL, so every failure ends the stream (the parser has paused after
        // <auth> and would otherwise have to resume the old document).
        guard mechanism == "PLAIN" || mechanism == "X-OAUTH2" else { return saslFailure("invalid-mechanism") }
        guard let credentials = SASLCredentials(plainPayloadBase64: stanza.text) else {
            return saslFailure("malformed-request")
        }
        return [.authenticate(credentials)]
    }

    // MARK: after authentication

    private mutating func authenticatedStanza(_ stanza: XMLElement) -> [Action] {
        if boundJID == nil && !Self.isBindRequest(stanza) {
            // RFC 6120 §7.1: no stanza is processed before the resource is bound. Until then the
            // session is not established: connection caps, draining and the device's online state
            // do not yet apply to it.
            return streamError("not-authorized", text: "bind a resource before sending stanzas (RFC 6120 section 7.1)")
        }
        switch stanza.name {
        case "iq": return iq(stanza)
        case "presence": return []
        default: return [.stanza(stanza)]
        }
    }

    private mutating func iq(_ iq: XMLElement) -> [Action] {
        let type = iq.attribute("type") ?? ""
        let id = iq.attribute("id") ?? ""
        if type == "result" || type == "error" { return [] }
        guard type == "get" || type == "set" else {
            return [.write(iqError(iq, condition: "bad-request", type: "modify"))]
        }
        let payload = iq.childElements.first
        switch (payload?.name, payload?.namespace) {
        case ("bind", NS.bind) where type == "set":
            let requested = payload?.firstChild(named: "resource")?.text.trimmedXMLSpace ?? ""
            let resource = requested.isEmpty ? Self.makeResource() : requested
            let jid = "\(username ?? "")@\(jidDomain)/\(resource)"
            boundJID = jid
            let reply = "<iq\(replyAddressing(iq)) id=\"\(XMLEscaping.escapeAttribute(id))\" type=\"result\"><bind xmlns=\"\(NS.bind)\"><jid>\(XMLEscaping.escapeText(jid))</jid></bind></iq>"
            let refusal = iqError(iq, condition: "resource-constraint", type: "wait")
            return [.bound(jid: jid, reply: reply, refusal: refusal)]
        case ("session", NS.session) where type == "set":
            return [.write(iqResult(iq))]
        case ("ping", NS.ping) where type == "get":
            return [.write(iqResult(iq))]
        case ("query", NS.roster) where type == "get":
            return [.write("<iq\(replyAddressing(iq)) id=\"\(XMLEscaping.escapeAttribute(id))\" type=\"result\"><query xmlns=\"\(NS.roster)\"/></iq>")]
        default:
            return [.write(iqError(iq, condition: "service-unavailable", type: "cancel"))]
        }
    }

    static func isBindRequest(_ stanza: XMLElement) -> Bool {
        guard stanza.name == "iq", stanza.attribute("type") == "set", let payload = stanza.childElements.first else {
            return false
        }
        return payload.name == "bind" && payload.namespace == NS.bind
    }

    private func replyAddressing(_ request: XMLElement) -> String {
        var s = ""
        if let to = request.attribute("to") { s += " from=\"\(XMLEscaping.escapeAttribute(to))\"" }
        if let jid = boundJID { s += " to=\"\(XMLEscaping.escapeAttribute(jid))\"" }
        return s
    }

    public func iqResult(_ request: XMLElement) -> String {
        "<iq\(replyAddressing(request)) id=\"\(XMLEscaping.escapeAttribute(request.attribute("id") ?? ""))\" type=\"result\"/>"
    }

    public func iqError(_ request: XMLElement, condition: String, type: String) -> String {
        "<iq\(replyAddressing(request)) id=\"\(XMLEscaping.escapeAttribute(request.attribute("id") ?? ""))\" type=\"error\"><error type=\"\(type)\"><\(condition) xmlns=\"\(NS.stanzas)\"/></error></iq>"
    }

    // MARK: helpers

    private func streamHeader() -> String {
        "<stream:stream from=\"\(XMLEscaping.escapeAttribute(serviceDomain))\" id=\"\(streamID)\" version=\"1.0\" xmlns:stream=\"\(NS.stream)\" xmlns=\"\(NS.client)\">"
    }

    static func makeStreamID() -> String {
        var g = SystemRandomNumberGenerator()
        return String(format: "%016llX", g.next() as UInt64)
    }

    static func makeResource() -> String {
        var g = SystemRandomNumberGenerator()
        return String(format: "%08X", UInt32.random(in: .min ... .max, using: &g))
    }
}

/// The three fields of a SASL PLAIN message (RFC 4616): `authzid \0 authcid \0 passwd`.
public struct SASLCredentials: Sendable, Equatable {
    public var authzid: String
    public var authcid: String
    public var password: String

    public init(authzid: String, authcid: String, password: String) {
        self.authzid = authzid
        self.authcid = authcid
        self.password = password
    }

    public init?(plainPayloadBase64 text: String) {
        let b64 = text.trimmedXMLSpace
        guard !b64.isEmpty, b64 != "=", let data = Data(base64Encoded: b64) else { return nil }
        let parts = data.split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        authzid = String(decoding: parts[0], as: UTF8.self)
        authcid = String(decoding: parts[1], as: UTF8.self)
        password = String(decoding: parts[2], as: UTF8.self)
    }

    /// The user's localpart: from the authcid, or the authzid when the authcid is empty. Domains are
    /// ignored (real clients send `id`, `id@gcm.googleapis.com` and other domains alike).
    public var localpart: String {
        let user = authcid.isEmpty ? authzid : authcid
        return String(user.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
    }
}

extension String {
    var trimmedXMLSpace: String { trimmingCharacters(in: .whitespacesAndNewlines) }
}
