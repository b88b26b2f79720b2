import Testing
import XMLStreaming

let billionLaughs = """
    <?xml version="1.0"?>
    <!DOCTYPE lolz [
     <!ENTITY lol "lol">
     <!ELEMENT lolz (#PCDATA)>
     <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
     <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
     <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
     <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
     <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
     <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
     <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
     <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
     <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
    ]>
    <lolz>&lol9;</lolz>
    """

@Suite struct RestrictionTests {
    @Test func billionLaughsIsRefusedAtTheDoctype() {
        let error = parseError(billionLaughs)
        #expect(isRestricted(error), "got \(String(describing: error))")
        #expect(error?.streamErrorCondition == "restricted-xml")
    }

    @Test func billionLaughsIsRefusedBeforeAnyEntityIsRead() {
        // Only the start of the DOCTYPE: already refused, before a single entity declaration arrives.
        let parser = XMLStreamParser()
        let error = feedError(parser, "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [")
        #expect(isRestricted(error), "got \(String(describing: error))")
        // Byte by byte too.
        let bytewise = XMLStreamParser()
        var bytewiseError: XMLStreamError?
        for byte in Array(billionLaughs.utf8) {
            if let error = feedError(bytewise, [byte]) {
                bytewiseError = error
                break
            }
        }
        #expect(isRestricted(bytewiseError))
    }

    @Test func doctypeIsRefused() {
        #expect(isRestricted(parseError("<!DOCTYPE stream:stream>" + streamHeader)))
        #expect(isRestricted(parseError("<?xml version='1.0'?><!DOCTYPE x SYSTEM 'file:///etc/passwd'><x>&ext;</x>")))
    }

    @Test func internalEntityDeclarationIsRefused() {
        let error = parseError("<!DOCTYPE x [<!ENTITY a 'b'>]><x>&a;</x>")
        #expect(isRestricted(error), "got \(String(describing: error))")
    }

    @Test func commentsAreRefusedAnywhere() {
        #expect(isRestricted(parseError("<!-- before -->" + streamHeader)))
        #expect(isRestricted(parseError(streamHeader + "<!-- between stanzas -->")))
        #expect(isRestricted(parseError(streamHeader + "<message><!-- inside --></message>")))
    }

    @Test func processingInstructionsAreRefused() {
        #expect(isRestricted(parseError(streamHeader + "<?foo bar?>")))
        #expect(isRestricted(parseError(streamHeader + "<message><?foo bar?></message>")))
        #expect(isRestricted(parseError("<?xml-stylesheet href='x'?>" + streamHeader)))
    }

    @Test func eventsBeforeTheRestrictedPartAreReturnedByEarlierFeeds() throws {
        let parser = XMLStreamParser()
        #expect(try parser.feed(streamHeader + "<a/>").count == 2)
        #expect(isRestricted(feedError(parser, "<?foo bar?>")))
    }
}

@Suite struct InvalidXMLTests {
    @Test func invalidUTF8IsInvalidXML() {
        let parser = XMLStreamParser()
        let error = feedError(parser, Array((streamHeader + "<message><body>").utf8) + [0xC3, 0x28])
        #expect(isInvalid(error), "got \(String(describing: error))")
        #expect(error?.streamErrorCondition == "invalid-xml")
        if case .invalidXML(let message) = error {
            #expect(message.contains("line 1"), "message: \(message)")
        }
    }

    @Test func invalidUTF8SplitAcrossFeedsIsInvalidXML() throws {
        let parser = XMLStreamParser()
        _ = try parser.feed(streamHeader + "<message><body>")
        _ = try parser.feed([0xC3])
        #expect(isInvalid(feedError(parser, [0x28])))
    }

    @Test func mismatchedTagIsInvalidXML() {
        let error = parseError(streamHeader + "<message><body></message>")
        #expect(isInvalid(error))
        if case .invalidXML(let message) = error {
            #expect(message.contains("mismatched tag"), "message: \(message)")
        }
    }

    @Test func undefinedEntityIsInvalidXML() {
        let error = parseError(streamHeader + "<message><body>&foo;</body></message>")
        #expect(isInvalid(error))
        if case .invalidXML(let message) = error {
            #expect(message.contains("undefined entity"), "message: \(message)")
        }
    }

    @Test func garbageAfterTheRootIsInvalidXML() {
        #expect(isInvalid(parseError(streamHeader + "</stream:stream><junk/>")))
    }

    @Test func xmlDeclarationInsideTheStreamIsInvalidXML() {
        #expect(isInvalid(parseError(streamHeader + "<?xml version='1.0'?>")))
    }

    @Test func duplicateAttributeIsInvalidXML() {
        #expect(isInvalid(parseError(streamHeader + "<message to='a' to='b'/>")))
    }

    @Test func undeclaredPrefixIsInvalidXML() {
        #expect(isInvalid(parseError(streamHeader + "<foo:message/>")))
    }

    @Test func anErrorKillsTheParser() throws {
        let parser = XMLStreamParser()
        _ = try parser.feed(streamHeader)
        let first = feedError(parser, "<a></b>")
        #expect(isInvalid(first))
        // Valid input, empty input, other overloads: all throw the same error.
        #expect(feedError(parser, "<c/>") == first)
        #expect(feedError(parser, [UInt8]()) == first)
        #expect(throws: first!) {
            try [UInt8]("<d/>".utf8).withUnsafeBytes { buffer in _ = try parser.feed(buffer) }
        }
        // reset() does not revive it either.
        parser.reset()
        #expect(feedError(parser, streamHeader) == first)
    }

    @Test func aPolicyErrorAlsoKillsTheParser() throws {
        var limits = XMLStreamLimits.preAuth
        limits.maxDepth = 1
        let parser = XMLStreamParser(limits: limits)
        _ = try parser.feed(streamHeader)
        let first = feedError(parser, "<a><b/></a>")
        #expect(isPolicyViolation(first))
        #expect(feedError(parser, "<c/>") == first)
    }
}

@Suite struct DeclarationAfterHeaderTests {
    @Test func doctypeAfterTheStreamHeaderIsRestricted() throws {
        let parser = XMLStreamParser()
        _ = try parser.feed("<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>")
        #expect(throws: XMLStreamError.self) { _ = try parser.feed("<!DOCTYPE m [<!ENTITY a 'b'>]><message/>") }
        do {
            _ = try parser.feed("<x/>")
            Issue.record("a dead parser must keep throwing")
        } catch {
            #expect(error.streamErrorCondition == "restricted-xml")
        }
    }
}
