import Testing
import XMLStreaming

@Suite struct SerializerTests {
    @Test func compactOutputWithAttributesInOrder() {
        let message = XMLElement(
            name: "message", namespace: "jabber:client",
            attributes: [XMLAttribute(name: "to", value: "a@b"), XMLAttribute(name: "id", value: "1")],
            children: [.element(XMLElement(name: "body", namespace: "jabber:client", children: [.text("hi")]))])
        #expect(message.serialized() == #"<message xmlns="jabber:client" to="a@b" id="1"><body>hi</body></message>"#)
    }

    @Test func emptyElements() {
        #expect(XMLElement(name: "presence").serialized() == "<presence/>")
        #expect(XMLElement(name: "a", children: [.element(XMLElement(name: "b"))]).serialized() == "<a><b/></a>")
    }

    @Test func textAndAttributeEscaping() {
        let element = XMLElement(
            name: "x", attributes: [XMLAttribute(name: "v", value: "a&b<c>\"d\"'e'\n\t\r")],
            children: [.text("a&b<c>\"d\"'e'\n\t")])
        #expect(element.serialized()
            == "<x v=\"a&amp;b&lt;c&gt;&quot;d&quot;'e'&#10;&#9;&#13;\">a&amp;b&lt;c&gt;\"d\"'e'\n\t</x>")
    }

    @Test func escapingHelpers() {
        #expect(XMLEscaping.escapeText("plain text ✓") == "plain text ✓")
        #expect(XMLEscaping.escapeText("{\"to\":\"a<b>&c\"}") == "{\"to\":\"a&lt;b&gt;&amp;c\"}")
        #expect(XMLEscaping.escapeText("a\rb") == "a&#13;b")
        #expect(XMLEscaping.escapeAttribute("say \"hi\" & <bye>") == "say &quot;hi&quot; &amp; &lt;bye&gt;")
        #expect(XMLEscaping.escapeAttribute("l1\nl2\tx\ry") == "l1&#10;l2&#9;x&#13;y")
        #expect(XMLEscaping.escapeAttribute("it's") == "it's")
    }

    @Test func charactersXMLCannotCarryAreReplaced() {
        #expect(XMLEscaping.escapeText("a\u{0}b\u{1B}c") == "a\u{FFFD}b\u{FFFD}c")
        #expect(XMLEscaping.escapeAttribute("\u{FFFE}x\u{FFFF}") == "\u{FFFD}x\u{FFFD}")
        #expect(XMLEscaping.escapeText("\u{FFFD}\u{FEFF}é") == "\u{FFFD}\u{FEFF}é")  // EF BF BD / EF BB BF untouched
    }

    @Test func defaultNamespaceIsDeclaredOnlyWhereItChanges() {
        let element = XMLElement(
            name: "message", namespace: "jabber:client",
            children: [
                .element(XMLElement(name: "gcm", namespace: "google:mobile:data", children: [.text("{}")])),
                .element(XMLElement(name: "body", namespace: "jabber:client")),
                .element(XMLElement(name: "nons")),
            ])
        #expect(element.serialized()
            == #"<message xmlns="jabber:client"><gcm xmlns="google:mobile:data">{}</gcm><body/><nons xmlns=""/></message>"#)
    }

    @Test func prefixedElementsDeclareTheirPrefixOnce() {
        let error = XMLElement(
            name: "error", namespace: streamsNS, prefix: "stream",
            children: [
                .element(XMLElement(name: "policy-violation", namespace: "urn:ietf:params:xml:ns:xmpp-streams")),
                .element(XMLElement(name: "inner", namespace: streamsNS, prefix: "stream")),
            ])
        #expect(error.serialized()
            == "<stream:error xmlns:stream=\"\(streamsNS)\">"
            + "<policy-violation xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\"/><stream:inner/></stream:error>")
    }

    @Test func namespacedAttributes() {
        let element = XMLElement(
            name: "x",
            attributes: [
                XMLAttribute(name: "lang", namespace: "http://www.w3.org/XML/1998/namespace", prefix: "xml", value: "en"),
                XMLAttribute(name: "bar", namespace: "urn:foo", prefix: "foo", value: "1"),
                XMLAttribute(name: "baz", namespace: "urn:foo", prefix: "foo", value: "2"),
                XMLAttribute(name: "qux", namespace: "urn:gen", value: "3"),
            ],
            children: [.element(XMLElement(
                name: "y", attributes: [XMLAttribute(name: "bar", namespace: "urn:foo", prefix: "foo", value: "4")]))])
        #expect(element.serialized()
            == "<x xmlns:foo=\"urn:foo\" xmlns:ns1=\"urn:gen\" xml:lang=\"en\" foo:bar=\"1\" foo:baz=\"2\" ns1:qux=\"3\">"
            + "<y foo:bar=\"4\"/></x>")
    }

    @Test func attributePrefixClashingWithTheElementPrefixGetsAnotherPrefix() throws {
        let element = XMLElement(
            name: "x", namespace: "urn:a", prefix: "p",
            attributes: [XMLAttribute(name: "at", namespace: "urn:b", prefix: "p", value: "v")])
        let xml = element.serialized()
        #expect(xml == "<p:x xmlns:p=\"urn:a\" xmlns:ns1=\"urn:b\" ns1:at=\"v\"/>")
        // And it means what the tree says.
        let parsed = try #require(try stanzas(xml).first)
        #expect(parsed.namespace == "urn:a")
        #expect(parsed.attributes == [XMLAttribute(name: "at", namespace: "urn:b", prefix: "ns1", value: "v")])
    }

    @Test func roundTripGivesAnEqualTree() throws {
        let body = """
            <message xmlns='jabber:client' to='device@gcm.googleapis.com' id='m&amp;1' type="normal" \
            xml:lang='en' note='line1&#10;line2&#9;tab &quot;q&quot; &apos;s&apos; &lt;&gt;'>\
            <gcm xmlns='google:mobile:data'>{&quot;to&quot;:&quot;x&quot;,&quot;data&quot;:{&quot;t&quot;:&quot;a&lt;b&amp;c&quot;}}</gcm>\
            <body>héllo ✓ 😀 &#x1F600; <![CDATA[<raw> & ]]>\r\n  </body>\
            <x xmlns:foo='urn:foo' foo:attr='1'><foo:y foo:z='2'/><z xmlns=''/></x>\
            <stream:error xmlns:stream='http://etherx.jabber.org/streams'/>\
            </message>\
            <iq xmlns='jabber:client' type='result' id='b'/>
            """
        let original = try stanzas(body)
        #expect(original.count == 2)
        for stanza in original {
            let xml = stanza.serialized()
            let reparsed = try stanzas(xml)
            #expect(reparsed == [stanza], "serialized: \(xml)")
            #expect(reparsed.first?.serialized() == xml)
        }
        // The decoded values survived.
        let message = try #require(original.first)
        #expect(message.attribute("note") == "line1\nline2\ttab \"q\" 's' <>")
        #expect(message.firstChild(named: "body")?.text == "héllo ✓ 😀 😀 <raw> & \n  ")
    }

    @Test func roundTripOfStanzasInheritingTheStreamNamespace() throws {
        // Inherited from the stream, the stanza's namespace is declared on the stanza when serialized
        // on its own: the tree means the same, only namespaceDeclarations differ.
        let original = try stanzas("<message id='1'><body>x</body><gcm xmlns='google:mobile:data'>{}</gcm></message>")
        let stanza = try #require(original.first)
        let xml = stanza.serialized()
        #expect(xml == #"<message xmlns="jabber:client" id="1"><body>x</body><gcm xmlns="google:mobile:data">{}</gcm></message>"#)
        let reparsed = try #require(try stanzas(xml).first)
        #expect(withoutDeclarations(reparsed) == withoutDeclarations(stanza))
        #expect(reparsed != stanza)
    }

    @Test func contradictoryDeclarationsAreNotWritten() throws {
        var element = XMLElement(
            name: "a", namespace: "urn:new",
            namespaceDeclarations: [XMLNamespaceDeclaration(uri: "urn:old"), XMLNamespaceDeclaration(prefix: "k", uri: "urn:k")])
        #expect(element.serialized() == #"<a xmlns:k="urn:k" xmlns="urn:new"/>"#)
        element.namespace = "urn:old"
        #expect(element.serialized() == #"<a xmlns="urn:old" xmlns:k="urn:k"/>"#)
    }

    @Test func serializedStanzasAreAcceptedByTheParser() throws {
        // Text with every special character, as other code builds stanzas.
        let payload = "{\"message_id\":\"m-1\",\"data\":{\"html\":\"<b>bold</b> & more\"}}"
        let element = XMLElement(
            name: "message", namespace: "jabber:client",
            children: [.element(XMLElement(name: "gcm", namespace: "google:mobile:data", children: [.text(payload)]))])
        let parsed = try #require(try stanzas(element.serialized()).first)
        #expect(parsed.firstChild(named: "gcm", namespace: "google:mobile:data")?.text == payload)
        let template = "<message><gcm xmlns='google:mobile:data'>\(XMLEscaping.escapeText(payload))</gcm></message>"
        #expect(try stanzas(template).first?.firstChild(named: "gcm")?.text == payload)
    }
}
