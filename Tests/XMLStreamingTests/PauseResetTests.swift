import Testing
import XMLStreaming

private let authStanza = "<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>AGFiYwBkZWY=</auth>"
private let iqStanza = "<iq type='set' id='bind1'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/></iq>"
private let restartDocument = streamHeader + authStanza + streamHeader + iqStanza

private func isAuth(_ element: XMLElement) -> Bool { element.name == "auth" }

private func names(_ events: [XMLStreamEvent]) -> [String] {
    events.map { event in
        switch event {
        case .streamOpen(let element): return "open:" + element.name
        case .stanza(let element): return element.name
        case .streamClose: return "close"
        }
    }
}

@Suite struct PauseResetTests {
    @Test func pauseAfterAuthThenResetParsesTheRetainedRestart() throws {
        let parser = XMLStreamParser()
        parser.pauseAfter = { $0.name == "auth" }
        let first = try parser.feed(restartDocument)
        #expect(names(first) == ["open:stream", "auth"])
        guard case .stanza(let auth) = first.last else {
            Issue.record("no auth stanza")
            return
        }
        #expect(auth.namespace == saslNS && auth.text == "AGFiYwBkZWY=")
        #expect(parser.isPaused)

        parser.reset()
        #expect(!parser.isPaused)
        let second = try parser.feed([UInt8]())
        #expect(second.first == .streamOpen(expectedStreamElement))
        #expect(names(second) == ["open:stream", "iq"])
        guard case .stanza(let iq) = second.last else { return }
        #expect(iq.attribute("id") == "bind1")
        #expect(iq.firstChild(named: "bind", namespace: "urn:ietf:params:xml:ns:xmpp-bind") != nil)
        #expect(try parser.feed("</stream:stream>") == [.streamClose])
    }

    @Test func withoutPauseTheSameBytesAreAnError() {
        // A second <stream:stream> inside the first is just an element; the point of pausing is the
        // second XML declaration, which is not allowed there.
        #expect(isInvalid(parseError(restartDocument)))
    }

    @Test func bytesFedWhilePausedAreKeptAndParsedAfterReset() throws {
        let parser = XMLStreamParser()
        parser.pauseAfter = isAuth
        #expect(names(try parser.feed(streamHeader + authStanza + "<stream:str")) == ["open:stream", "auth"])
        #expect(parser.isPaused)
        // While paused nothing is parsed, not even complete stanzas.
        #expect(try parser.feed("eam to='gcm.googleapis.com' version='1.0' xmlns='jabber:client' ") == [])
        #expect(try parser.feed("xmlns:stream='http://etherx.jabber.org/streams'><iq/>") == [])
        #expect(parser.isPaused)
        parser.reset()
        #expect(names(try parser.feed("<presence/>")) == ["open:stream", "iq", "presence"])
    }

    @Test func pauseAtTheVeryEndOfAFeed() throws {
        let parser = XMLStreamParser()
        parser.pauseAfter = isAuth
        #expect(names(try parser.feed(streamHeader + authStanza)) == ["open:stream", "auth"])
        #expect(parser.isPaused)
        parser.reset()
        #expect(try parser.feed([UInt8]()) == [])
        #expect(names(try parser.feed(streamHeader + iqStanza)) == ["open:stream", "iq"])
    }

    @Test func pauseWorksByteByByte() throws {
        let parser = XMLStreamParser()
        parser.pauseAfter = isAuth
        var events: [XMLStreamEvent] = []
        var pausedAt: Int?
        let bytes = Array(restartDocument.utf8)
        for (index, byte) in bytes.enumerated() {
            events += try parser.feed([byte])
            if parser.isPaused && pausedAt == nil { pausedAt = index }
        }
        #expect(names(events) == ["open:stream", "auth"])
        #expect(pausedAt == (streamHeader + authStanza).utf8.count - 1)
        parser.reset()
        #expect(names(try parser.feed([UInt8]())) == ["open:stream", "iq"])
    }

    @Test(arguments: [7, 99, 2024] as [UInt64])
    func pauseWorksWithRandomChunks(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let bytes = Array(restartDocument.utf8)
        let parser = XMLStreamParser()
        parser.pauseAfter = isAuth
        var events: [XMLStreamEvent] = []
        var offset = 0
        while offset < bytes.count {
            let length = min(Int.random(in: 1...60, using: &random), bytes.count - offset)
            events += try parser.feed(Array(bytes[offset..<(offset + length)]))
            offset += length
            if parser.isPaused {
                parser.reset()
            }
        }
        events += try parser.feed([UInt8]())
        #expect(names(events) == ["open:stream", "auth", "open:stream", "iq"])
    }

    @Test func pauseInALaterSliceOfABigFeed() throws {
        // More than one internal slice (16 KiB) before the pausing stanza.
        let filler = String(repeating: "<message><body>hello world</body></message>", count: 1000)  // ~43 KB
        let parser = XMLStreamParser(limits: .postAuth)
        parser.pauseAfter = isAuth
        let first = try parser.feed(streamHeader + filler + authStanza + "<after1/>" + filler + "<after2/>")
        #expect(first.count == 1 + 1000 + 1)
        #expect(names(first).last == "auth")
        parser.resume()
        #expect(!parser.isPaused)
        let second = try parser.feed([UInt8]())
        #expect(second.count == 1000 + 2)
        #expect(names(second).first == "after1")
        #expect(names(second).last == "after2")
    }

    @Test func resumeContinuesTheSameDocument() throws {
        // E.g. a failed SASL attempt: no restart, the client tries again in the same stream.
        let parser = XMLStreamParser()
        parser.pauseAfter = isAuth
        let input = streamHeader + authStanza + "<iq id='1'/>" + authStanza + "<iq id='2'/>"
        #expect(names(try parser.feed(input)) == ["open:stream", "auth"])
        #expect(try parser.feed("<iq id='3'/>") == [])  // kept while paused
        parser.resume()
        // Pauses again at the second <auth>, from the bytes expat still held.
        #expect(names(try parser.feed([UInt8]())) == ["iq", "auth"])
        #expect(parser.isPaused)
        parser.resume()
        let rest = try parser.feed("</stream:stream>")
        #expect(names(rest) == ["iq", "iq", "close"])
        let ids = rest.compactMap { event -> String? in
            if case .stanza(let element) = event { return element.attribute("id") }
            return nil
        }
        #expect(ids == ["2", "3"])
    }

    @Test func pauseAfterIsCalledForEveryStanzaOnly() throws {
        let parser = XMLStreamParser()
        let seen = SeenNames()
        parser.pauseAfter = { element in
            seen.append(element.name)
            return false
        }
        _ = try parser.feed(streamHeader + "<a><b/></a><c/></stream:stream>")
        #expect(seen.names == ["a", "c"])
        #expect(!parser.isPaused)
    }

    @Test func dataWhilePausedIsBounded() throws {
        let parser = XMLStreamParser()
        parser.pauseAfter = isAuth
        _ = try parser.feed(streamHeader + authStanza)
        #expect(try parser.feed(String(repeating: " ", count: 8000)) == [])
        #expect(isPolicyViolation(feedError(parser, String(repeating: " ", count: 1000))))
    }

    @Test func resetWithoutPauseStartsAFreshDocument() throws {
        let parser = XMLStreamParser()
        _ = try parser.feed(streamHeader + "<message><bo")
        parser.reset()
        #expect(names(try parser.feed(streamHeader + "<iq/>")) == ["open:stream", "iq"])
    }

    @Test func limitsAreKeptAcrossReset() throws {
        let parser = XMLStreamParser()
        parser.limits = .postAuth
        parser.reset()
        #expect(parser.limits == .postAuth)
        let big = "<message><body>" + String(repeating: "x", count: 20_000) + "</body></message>"
        #expect(names(try parser.feed(streamHeader + big)) == ["open:stream", "message"])
    }
}

/// Collects names from the @Sendable pauseAfter closure (called synchronously on the test's thread).
private final class SeenNames: @unchecked Sendable {
    var names: [String] = []
    func append(_ name: String) { names.append(name) }
}
