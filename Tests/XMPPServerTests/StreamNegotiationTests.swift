import Foundation
import Testing
import XMLStreaming
@testable import XMPPServer

func parse(_ xml: String) throws -> [XMLStreamEvent] {
    try XMLStreamParser(limits: .postAuth).feed(xml)
}

func header(to: String? = "gcm.googleapis.com") throws -> XMLElement {
    let attr = to.map { " to='\($0)'" } ?? ""
    guard case .streamOpen(let h)? = try parse("<stream:stream\(attr) version='1.0' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>").first else {
        throw CocoaError(.coderInvalidValue)
    }
    return h
}

func stanza(_ xml: String) throws -> XMLElement {
    let events = try parse("<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>" + xml)
    guard case .stanza(let s)? = events.last else { throw CocoaError(.coderInvalidValue) }
    return s
}

/// What the connection writes, taking the bind result as accepted.
func written(_ actions: [StreamNegotiation.Action]) -> String {
    actions.compactMap {
        switch $0 {
        case .write(let s): return s
        case .bound(_, let reply, _): return reply
        default: return nil
        }
    }.joined()
}

func auth(_ payload: String, mechanism: String = "PLAIN") throws -> XMLElement {
    try stanza("<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='\(mechanism)'>\(Data(payload.utf8).base64EncodedString())</auth>")
}

/// A negotiation that has authenticated as 123 and restarted the stream.
func authenticated() throws -> StreamNegotiation {
    var n = StreamNegotiation()
    _ = n.streamOpened(try header())
    _ = n.stanzaReceived(try auth("\0" + "123@gcm.googleapis.com\0key"))
    _ = n.authenticationSucceeded(username: "123")
    _ = n.streamOpened(try header())
    return n
}

/// An authenticated negotiation with the resource `r` bound: the session is established.
func established() throws -> StreamNegotiation {
    var n = try authenticated()
    _ = n.stanzaReceived(try stanza("<iq type='set' id='b'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><resource>r</resource></bind></iq>"))
    return n
}

@Suite struct StreamNegotiationTests {
    @Test func headerEchoesTheClientsToAndOffersPlainWithoutStarttls() throws {
        var n = StreamNegotiation()
        let out = written(n.streamOpened(try header(to: "FCM XMPP Client Connection Server")))
        #expect(out.hasPrefix("<stream:stream from=\"FCM XMPP Client Connection Server\" id=\""))
        #expect(out.contains("xmlns=\"jabber:client\""))
        #expect(out.contains("<mechanism>PLAIN</mechanism>"))
        #expect(!out.contains("starttls"))
        #expect(!out.contains("urn:xmpp:sm"))
        #expect(n.streamID.count == 16 && n.streamID.allSatisfy { $0.isHexDigit && !$0.isLowercase })
    }

    @Test(arguments: [
        "\0" + "123@gcm.googleapis.com\0key",               // Smack 4, PHP
        "123@gcm.googleapis.com\0" + "123@gcm.googleapis.com\0key", // Smack 3
        "\0" + "123\0key",                                  // go-xmpp, SleekXMPP
        "123@gcm.googleapis.com\0" + "123\0key",            // xmpppy
    ])
    func everyPlainShapeYieldsTheSenderID(_ payload: String) throws {
        var n = StreamNegotiation()
        _ = n.streamOpened(try header())
        let actions = n.stanzaReceived(try auth(payload))
        guard case .authenticate(let credentials)? = actions.first else { Issue.record("no authenticate action"); return }
        #expect(credentials.localpart == "123")
        #expect(credentials.password == "key")
    }

    @Test func xOAuth2TakesTheSamePayload() throws {
        var n = StreamNegotiation()
        _ = n.streamOpened(try header())
        guard case .authenticate(let c)? = n.stanzaReceived(try auth("\0" + "123\0key", mechanism: "X-OAUTH2")).first else {
            Issue.record("no authenticate action"); return
        }
        #expect(c.localpart == "123")
    }

    @Test func failureIsNotAuthorizedAndClosesTheStream() throws {
        var n = StreamNegotiation()
        _ = n.streamOpened(try header())
        let actions = n.authenticationFailed()
        #expect(written(actions) == "<failure xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\"><not-authorized/></failure></stream:stream>")
        #expect(actions.contains(.close))
    }

    @Test func aFailureMaySayWhy() throws {
        var n = StreamNegotiation()
        _ = n.streamOpened(try header())
        let out = written(n.authenticationFailed(text: "wrong server key for sender 1 <strict>"))
        #expect(out == "<failure xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\"><not-authorized/><text xml:lang=\"en\">wrong server key for sender 1 &lt;strict&gt;</text></failure></stream:stream>")
    }

    @Test func anAppServerOnTheDevicePortIsToldWhereToGo() {
        let appServer = SASLCredentials(authzid: "", authcid: "123456789@gcm.googleapis.com", password: "key")
        #expect(XMPPConnectionHandler.deviceLoginRefusal(appServer, ccsPort: 5235)
                == "this is the device channel for simulated devices; app servers connect to the CCS port, port 5235")
        let bareSender = SASLCredentials(authzid: "", authcid: "123456789", password: "key")
        #expect(XMPPConnectionHandler.deviceLoginRefusal(bareSender, ccsPort: nil).contains("--ccs-port"))
        let device = SASLCredentials(authzid: "", authcid: "dd71bbe763774e31", password: "wrong")
        #expect(XMPPConnectionHandler.deviceLoginRefusal(device, ccsPort: 5235).hasPrefix("unknown device"))
    }

    @Test func malformedPayloadAndUnknownMechanismFail() throws {
        var n = StreamNegotiation()
        _ = n.streamOpened(try header())
        #expect(written(n.stanzaReceived(try stanza("<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>!!!</auth>"))).contains("malformed-request"))
        var m = StreamNegotiation()
        _ = m.streamOpened(try header())
        #expect(written(m.stanzaReceived(try auth("x", mechanism: "DIGEST-MD5"))).contains("invalid-mechanism"))
    }

    @Test func successRestartsAndOffersBindAndSession() throws {
        var n = StreamNegotiation()
        _ = n.streamOpened(try header())
        let success = n.authenticationSucceeded(username: "123")
        #expect(success.contains(.restartParser))
        let features = written(n.streamOpened(try header()))
        #expect(features.contains("<bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\"/>"))
        #expect(features.contains("<session xmlns=\"urn:ietf:params:xml:ns:xmpp-session\"/>"))
    }

    @Test func bindWithAndWithoutResource() throws {
        var n = try authenticated()
        let withResource = written(n.stanzaReceived(try stanza("<iq type='set' id='b1'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><resource>test</resource></bind></iq>")))
        #expect(withResource.contains("id=\"b1\" type=\"result\""))
        #expect(withResource.contains("<jid>123@gcm.googleapis.com/test</jid>"))
        var m = try authenticated()
        let actions = m.stanzaReceived(try stanza("<iq type='set' id='b2'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/></iq>"))
        #expect(written(actions).contains("<jid>123@gcm.googleapis.com/"))
        #expect(actions.contains { if case .bound = $0 { return true } else { return false } })
        #expect(m.isEstablished)
        guard case .bound(_, _, let refusal)? = actions.first else { Issue.record("no bound action"); return }
        #expect(refusal.contains("id=\"b2\" type=\"error\"") && refusal.contains("resource-constraint"))
    }

    @Test func sessionPingRosterPresenceAndUnknownIqs() throws {
        var n = try established()
        #expect(written(n.stanzaReceived(try stanza("<iq type='set' id='s'><session xmlns='urn:ietf:params:xml:ns:xmpp-session'/></iq>"))).contains("id=\"s\" type=\"result\""))
        let pong = written(n.stanzaReceived(try stanza("<iq type='get' id='c2s1' to='gcm.googleapis.com'><ping xmlns='urn:xmpp:ping'/></iq>")))
        #expect(pong == "<iq from=\"gcm.googleapis.com\" to=\"123@gcm.googleapis.com/r\" id=\"c2s1\" type=\"result\"/>")
        #expect(written(n.stanzaReceived(try stanza("<iq type='get' id='r'><query xmlns='jabber:iq:roster'/></iq>"))).contains("<query xmlns=\"jabber:iq:roster\"/>"))
        #expect(n.stanzaReceived(try stanza("<presence/>")).isEmpty)
        #expect(written(n.stanzaReceived(try stanza("<iq type='get' id='d'><query xmlns='http://jabber.org/protocol/disco#info'/></iq>"))).contains("service-unavailable"))
        #expect(n.stanzaReceived(try stanza("<iq type='result' id='x'/>")).isEmpty)
    }

    @Test func messagesGoToTheRoleOnlyAfterAuthentication() throws {
        var n = StreamNegotiation()
        _ = n.streamOpened(try header())
        let before = n.stanzaReceived(try stanza("<message><gcm xmlns='google:mobile:data'>{}</gcm></message>"))
        #expect(written(before).contains("<stream:error><not-authorized"))
        var m = try established()
        let after = m.stanzaReceived(try stanza("<message><gcm xmlns='google:mobile:data'>{}</gcm></message>"))
        #expect(after.contains { if case .stanza = $0 { return true } else { return false } })
    }

    /// RFC 6120 §7.1: before the resource is bound no stanza is processed; the bind itself is.
    @Test(arguments: [
        "<message><gcm xmlns='google:mobile:data'>{}</gcm></message>",
        "<presence/>",
        "<iq type='get' id='p'><ping xmlns='urn:xmpp:ping'/></iq>",
        "<iq type='set' id='s'><session xmlns='urn:ietf:params:xml:ns:xmpp-session'/></iq>",
    ])
    func stanzasBeforeTheBindEndTheStreamWithNotAuthorized(_ xml: String) throws {
        var n = try authenticated()
        let actions = n.stanzaReceived(try stanza(xml))
        #expect(written(actions).contains("<stream:error><not-authorized xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\"/><text"))
        #expect(actions.contains(.close))
        #expect(!actions.contains { if case .stanza = $0 { return true } else { return false } })
        var m = try authenticated()
        let bind = m.stanzaReceived(try stanza("<iq type='set' id='b'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/></iq>"))
        #expect(bind.contains { if case .bound = $0 { return true } else { return false } })
    }

    @Test func parseErrorsBecomeStreamErrorsWithAHeaderFirst() throws {
        var n = StreamNegotiation()
        let out = written(n.parseFailed(.restrictedXML("DOCTYPE")))
        #expect(out.hasPrefix("<stream:stream "))
        #expect(out.hasSuffix("<stream:error><restricted-xml xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\"/></stream:error></stream:stream>"))
        // Only one close, however many errors follow.
        #expect(n.parseFailed(.invalidXML("x")).isEmpty)
    }

    @Test func clientCloseIsAnsweredOnce() throws {
        var n = try authenticated()
        let actions = n.streamClosed()
        #expect(written(actions) == "</stream:stream>")
        #expect(actions.contains(.close))
        #expect(n.streamClosed().isEmpty)
    }
}
