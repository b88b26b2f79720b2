import Testing
import XMLStreaming

/// A realistic client session: stream header, SASL auth, a CCS upstream message, a multi-byte body, close.
let sessionDocument =
    streamHeader + "\n"
    + "<auth mechanism='PLAIN' xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>"
    + "MTIzNDU2Nzg5QGdjbS5nb29nbGVhcGlzLmNvbQBhcGlrZXk=</auth>\n "
    + "<message id='m1'><gcm xmlns=\"google:mobile:data\">{&quot;to&quot;:&quot;x&quot;}</gcm></message>"
    + " \t\r\n"
    + "<message id='m2' type='chat'><body>héllo ✓ 😀</body></message>"
    + "</stream:stream>"

let sessionEvents: [XMLStreamEvent] = [
    .streamOpen(expectedStreamElement),
    .stanza(XMLElement(
        name: "auth", namespace: saslNS,
        attributes: [XMLAttribute(name: "mechanism", value: "PLAIN")],
        children: [.text("MTIzNDU2Nzg5QGdjbS5nb29nbGVhcGlzLmNvbQBhcGlrZXk=")],
        namespaceDeclarations: [XMLNamespaceDeclaration(uri: saslNS)])),
    .stanza(XMLElement(
        name: "message", namespace: "jabber:client",
        attributes: [XMLAttribute(name: "id", value: "m1")],
        children: [.element(XMLElement(
            name: "gcm", namespace: gcmNS, children: [.text("{\"to\":\"x\"}")],
            namespaceDeclarations: [XMLNamespaceDeclaration(uri: gcmNS)]))])),
    .stanza(XMLElement(
        name: "message", namespace: "jabber:client",
        attributes: [XMLAttribute(name: "id", value: "m2"), XMLAttribute(name: "type", value: "chat")],
        children: [.element(XMLElement(
            name: "body", namespace: "jabber:client", children: [.text("héllo ✓ 😀")]))])),
    .streamClose,
]

@Suite struct ParserTests {
    @Test func wholeSessionGivesTheExpectedEvents() throws {
        #expect(try parse(sessionDocument) == sessionEvents)
    }

    @Test func byteByByteGivesTheSameEvents() throws {
        let parser = XMLStreamParser()
        var events: [XMLStreamEvent] = []
        for byte in Array(sessionDocument.utf8) {
            events += try parser.feed([byte])
        }
        #expect(events == sessionEvents)
    }

    @Test(arguments: [1, 2, 3, 42, 1234] as [UInt64])
    func randomChunksGiveTheSameEvents(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let bytes = Array(sessionDocument.utf8)
        let parser = XMLStreamParser()
        var events: [XMLStreamEvent] = []
        var offset = 0
        while offset < bytes.count {
            let length = min(Int.random(in: 0...40, using: &random), bytes.count - offset)
            events += try bytes[offset..<(offset + length)].withUnsafeBytes { buffer in
                try parser.feed(buffer)
            }
            offset += length
        }
        #expect(events == sessionEvents)
    }

    @Test func eachEventIsReturnedByTheFeedOfItsLastByte() throws {
        // Events must not be held back while the peer waits for an answer.
        let bytes = Array(sessionDocument.utf8)
        let parser = XMLStreamParser()
        var seen = 0
        for (index, byte) in bytes.enumerated() {
            let events = try parser.feed([byte])
            if !events.isEmpty {
                #expect(events.count == 1)
                #expect(byte == UInt8(ascii: ">"), "event completed at byte \(index)")
                seen += events.count
            }
        }
        #expect(seen == sessionEvents.count)
    }

    @Test func theThreeFeedOverloadsAgree() throws {
        let fromString = try XMLStreamParser().feed(sessionDocument)
        let fromArray = try XMLStreamParser().feed(Array(sessionDocument.utf8))
        let bytes = Array(sessionDocument.utf8)
        let parser = XMLStreamParser()
        let fromPointer = try bytes.withUnsafeBytes { buffer in try parser.feed(buffer) }
        #expect(fromString == sessionEvents)
        #expect(fromArray == sessionEvents)
        #expect(fromPointer == sessionEvents)
    }

    @Test func streamOpenIsReportedBeforeAnyStanzaAndHasNoChildren() throws {
        let parser = XMLStreamParser()
        #expect(try parser.feed(streamHeader) == [.streamOpen(expectedStreamElement)])
        #expect(try parser.feed("<presence/>") == [.stanza(XMLElement(name: "presence", namespace: "jabber:client"))])
        #expect(try parser.feed("</stream:stream>") == [.streamClose])
    }

    @Test func xmlDeclarationIsOptional() throws {
        let header = "<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>"
        let events = try parse(header + "<iq/>")
        #expect(events.count == 2)
        guard case .streamOpen(let root) = events.first else {
            Issue.record("no streamOpen")
            return
        }
        #expect(root.name == "stream" && root.namespace == streamsNS && root.prefix == "stream")
        #expect(root.attributes.isEmpty)
    }

    @Test func xmlLangOnTheStreamIsAnXMLNamespaceAttribute() throws {
        let events = try parse(
            "<stream:stream xmlns:stream='http://etherx.jabber.org/streams' xml:lang='en' id='abc'>")
        guard case .streamOpen(let root) = events.first else {
            Issue.record("no streamOpen")
            return
        }
        #expect(root.attributes == [
            XMLAttribute(name: "lang", namespace: "http://www.w3.org/XML/1998/namespace", prefix: "xml", value: "en"),
            XMLAttribute(name: "id", value: "abc"),
        ])
        #expect(root.attribute("lang") == nil)  // qualified, not unqualified
        #expect(root.attribute("id") == "abc")
        #expect(root.namespaceDeclarations == [XMLNamespaceDeclaration(prefix: "stream", uri: streamsNS)])
    }

    @Test func whitespaceAndStrayTextBetweenStanzasAreIgnored() throws {
        let events = try parse(streamHeader + "  \n<a/>\n\n stray text &amp; more \t<b/> ")
        #expect(events == [
            .streamOpen(expectedStreamElement),
            .stanza(XMLElement(name: "a", namespace: "jabber:client")),
            .stanza(XMLElement(name: "b", namespace: "jabber:client")),
        ])
    }

    @Test func entityAndCharacterReferencesAreDecoded() throws {
        let result = try stanzas(
            "<message><body>&lt;a&gt; &amp; &quot;q&quot; &apos;s&apos; &#x1F600; &#233;</body></message>")
        #expect(result.first?.firstChild(named: "body")?.text == "<a> & \"q\" 's' 😀 é")
        let attribute = try stanzas("<message id='&lt;&amp;&quot;&#x1F600;&#10;'/>")
        #expect(attribute.first?.attribute("id") == "<&\"😀\n")
    }

    @Test func textPiecesAndCDATAAreMergedIntoOneTextNode() throws {
        let result = try stanzas("<body>a&amp;b<![CDATA[<c>&amp;]]>d\ne</body>")
        #expect(result.first?.children == [.text("a&b<c>&amp;d\ne")])
    }

    @Test func mixedContentKeepsOrder() throws {
        let result = try stanzas("<a>x<b>inner</b>y<c/>z</a>")
        #expect(result.first?.children == [
            .text("x"),
            .element(XMLElement(name: "b", namespace: "jabber:client", children: [.text("inner")])),
            .text("y"),
            .element(XMLElement(name: "c", namespace: "jabber:client")),
            .text("z"),
        ])
        #expect(result.first?.text == "xyz")
        #expect(result.first?.childElements.map(\.name) == ["b", "c"])
    }

    @Test func whitespaceInsideStanzasIsKept() throws {
        let result = try stanzas("<message>\n  <body> a </body>\n</message>")
        #expect(result.first?.children.count == 3)
        #expect(result.first?.firstChild(named: "body")?.text == " a ")
    }

    @Test func namespacesPrefixesAndAttributes() throws {
        let result = try stanzas(
            "<iq xmlns:foo='urn:foo' foo:bar='1' plain='2'><foo:query/><query xmlns='urn:q'/><x xmlns=''/></iq>")
        let iq = try #require(result.first)
        #expect(iq.namespace == "jabber:client")
        #expect(iq.prefix == nil)
        #expect(iq.attributes == [
            XMLAttribute(name: "bar", namespace: "urn:foo", prefix: "foo", value: "1"),
            XMLAttribute(name: "plain", value: "2"),
        ])
        #expect(iq.namespaceDeclarations == [XMLNamespaceDeclaration(prefix: "foo", uri: "urn:foo")])
        #expect(iq.attribute("plain") == "2")
        #expect(iq.attribute("bar") == nil)
        let children = iq.childElements
        #expect(children.count == 3)
        #expect(children[0] == XMLElement(name: "query", namespace: "urn:foo", prefix: "foo"))
        #expect(children[1].namespace == "urn:q" && children[1].prefix == nil)
        #expect(children[2].namespace == nil)
        #expect(children[2].namespaceDeclarations == [XMLNamespaceDeclaration(prefix: nil, uri: "")])
        #expect(iq.firstChild(named: "query")?.namespace == "urn:foo")
        #expect(iq.firstChild(named: "query", namespace: "urn:q")?.namespace == "urn:q")
        #expect(iq.firstChild(named: "query", namespace: "urn:none") == nil)
        #expect(iq.firstChild(named: "nothing") == nil)
    }

    @Test func streamFeaturesWithTheStreamPrefix() throws {
        let result = try stanzas("<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/></stream:features>")
        let features = try #require(result.first)
        #expect(features.name == "features" && features.namespace == streamsNS && features.prefix == "stream")
        #expect(features.namespaceDeclarations.isEmpty)
    }

    @Test func emptyFeedsAreHarmless() throws {
        let parser = XMLStreamParser()
        #expect(try parser.feed([UInt8]()) == [])
        #expect(try parser.feed("") == [])
        #expect(try parser.feed(streamHeader).count == 1)
        #expect(try parser.feed([UInt8]()) == [])
    }

    @Test func aNonStreamRootIsStillReportedForTheCallerToCheck() throws {
        let events = try parse("<html xmlns='urn:x'><p/></html>")
        #expect(events == [
            .streamOpen(XMLElement(
                name: "html", namespace: "urn:x",
                namespaceDeclarations: [XMLNamespaceDeclaration(uri: "urn:x")])),
            .stanza(XMLElement(name: "p", namespace: "urn:x")),
            .streamClose,
        ])
    }

    @Test func errorConditionNames() {
        #expect(XMLStreamError.restrictedXML("x").streamErrorCondition == "restricted-xml")
        #expect(XMLStreamError.invalidXML("x").streamErrorCondition == "invalid-xml")
        #expect(XMLStreamError.policyViolation("x").streamErrorCondition == "policy-violation")
    }
}
