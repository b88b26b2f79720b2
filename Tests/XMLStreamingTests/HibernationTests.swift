import Testing
import XMLStreaming

@Suite struct HibernationTests {
    private let gcm = "<message id='m1'><gcm xmlns='google:mobile:data'>{\"a\":1}</gcm></message>"

    @Test func anIdleStreamHibernatesAndParsesTheSameAfterwards() throws {
        let parser = XMLStreamParser(limits: .postAuth)
        _ = try parser.feed(streamHeader + gcm + " ")
        #expect(parser.hibernate())
        #expect(parser.isHibernating)
        // An empty feed does not wake it; the next bytes do, in the same namespaces.
        #expect(try parser.feed([UInt8]()).isEmpty)
        #expect(parser.isHibernating)
        let events = try parser.feed("<message id='m2'><gcm xmlns='google:mobile:data'>{}</gcm></message><presence/>")
        #expect(!parser.isHibernating)
        guard events.count == 2, case .stanza(let message) = events[0], case .stanza(let presence) = events[1] else {
            Issue.record("expected two stanzas, got \(events)")
            return
        }
        #expect(message.namespace == "jabber:client" && message.attribute("id") == "m2")
        #expect(message.firstChild(named: "gcm", namespace: gcmNS)?.text == "{}")
        #expect(presence.namespace == "jabber:client")
        // The stream's own prefix still closes it.
        #expect(try parser.feed("</stream:stream>") == [.streamClose])
    }

    @Test func aStanzaSplitAcrossTheWakeUpIsParsedWhole() throws {
        let parser = XMLStreamParser(limits: .postAuth)
        _ = try parser.feed(streamHeader)
        #expect(parser.hibernate())
        #expect(try parser.feed("<message id='a'><gcm xmlns='google:mobile:da").isEmpty)
        #expect(!parser.hibernate()) // in the middle of a stanza: refused
        let events = try parser.feed("ta'>x</gcm></message>")
        guard case .stanza(let message)? = events.first else { Issue.record("no stanza"); return }
        #expect(message.firstChild(named: "gcm", namespace: gcmNS)?.text == "x")
    }

    @Test func limitsAndRestrictionsHoldAfterWakingUp() throws {
        var limits = XMLStreamLimits.postAuth
        limits.maxStanzaBytes = 200
        let parser = XMLStreamParser(limits: limits)
        _ = try parser.feed(streamHeader + gcm)
        #expect(parser.hibernate())
        let big = "<message><body>" + String(repeating: "x", count: 300) + "</body></message>"
        guard case .policyViolation? = feedError(parser, big) else {
            Issue.record("a stanza over the limit passed after hibernation")
            return
        }
        let other = XMLStreamParser(limits: .postAuth)
        _ = try other.feed(streamHeader)
        #expect(other.hibernate())
        guard case .restrictedXML? = feedError(other, "<!-- hello -->") else {
            Issue.record("a comment passed after hibernation")
            return
        }
    }

    @Test func notBeforeTheStreamIsOpenNorWhilePaused() throws {
        let parser = XMLStreamParser()
        #expect(!parser.hibernate())
        parser.pauseAfter = { $0.name == "auth" }
        _ = try parser.feed(streamHeader + "<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>x</auth>")
        #expect(parser.isPaused)
        #expect(!parser.hibernate())
    }
}
