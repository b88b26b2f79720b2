import Testing
import XMLStreaming

@Suite struct LimitTests {
    @Test func defaults() {
        #expect(XMLStreamLimits.preAuth == XMLStreamLimits(
            maxStanzaBytes: 8192, maxDepth: 16, maxAttributes: 32, maxElementsPerStanza: 32))
        #expect(XMLStreamLimits.postAuth == XMLStreamLimits(
            maxStanzaBytes: 65536, maxDepth: 32, maxAttributes: 64, maxElementsPerStanza: 4096))
        #expect(XMLStreamParser().limits == .preAuth)
    }

    // MARK: maxStanzaBytes

    @Test func stanzaOfExactlyTheLimitPassesOneMoreByteFails() throws {
        let stanza = "<message to='x'><body>" + String(repeating: "a", count: 500) + "</body></message>"
        var limits = XMLStreamLimits.preAuth
        limits.maxStanzaBytes = stanza.utf8.count
        #expect(try stanzas(stanza, limits: limits).count == 1)
        limits.maxStanzaBytes -= 1
        #expect(isPolicyViolation(parseError(streamHeader + stanza, limits: limits)))
    }

    @Test func stanzaSizeCountsBytesNotCharacters() throws {
        let stanza = "<body>" + String(repeating: "😀", count: 100) + "</body>"  // 413 bytes, 113 characters
        var limits = XMLStreamLimits.preAuth
        limits.maxStanzaBytes = 412
        #expect(isPolicyViolation(parseError(streamHeader + stanza, limits: limits)))
        limits.maxStanzaBytes = 413
        #expect(try stanzas(stanza, limits: limits).count == 1)
    }

    @Test func manySmallStanzasInOneFeedAreFine() throws {
        // The limit is per stanza, not per feed.
        let body = String(repeating: "<message><body>hello</body></message>\n", count: 2000)  // ~76 KB
        #expect(try stanzas(body).count == 2000)
    }

    @Test func endlessTextNodeFedInChunksIsStoppedEarly() throws {
        // A 10 MB text node in 4 KB chunks must be refused once it passes the limit, not buffered.
        let parser = XMLStreamParser(limits: .postAuth)
        _ = try parser.feed(streamHeader + "<message><body>")
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 4096)
        var fed = 0
        var error: XMLStreamError?
        while fed < 10_000_000 {
            if let thrown = feedError(parser, chunk) {
                error = thrown
                break
            }
            fed += chunk.count
        }
        #expect(isPolicyViolation(error))
        #expect(fed <= XMLStreamLimits.postAuth.maxStanzaBytes, "accepted \(fed) bytes first")
    }

    @Test func endlessStartTagIsStoppedEarly() throws {
        // expat buffers an unfinished tag; the limit is checked on every feed.
        let parser = XMLStreamParser()
        _ = try parser.feed(streamHeader + "<message to='")
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        var fed = 0
        var error: XMLStreamError?
        while fed < 1_000_000 {
            if let thrown = feedError(parser, chunk) {
                error = thrown
                break
            }
            fed += chunk.count
        }
        #expect(isPolicyViolation(error))
        #expect(fed <= XMLStreamLimits.preAuth.maxStanzaBytes)
    }

    @Test func endlessStreamHeaderIsStoppedEarly() {
        let parser = XMLStreamParser()
        var error = feedError(parser, "<stream:stream xmlns:stream='http://etherx.jabber.org/streams' to='")
        var fed = 0  // bytes accepted without an error
        while error == nil && fed < 1_000_000 {
            error = feedError(parser, String(repeating: "b", count: 1000))
            if error == nil { fed += 1000 }
        }
        #expect(isPolicyViolation(error))
        #expect(fed <= XMLStreamLimits.preAuth.maxStanzaBytes)
    }

    @Test func hugeStanzaInOneFeedIsRefused() {
        let stanza = "<message><body>" + String(repeating: "x", count: 1_000_000) + "</body></message>"
        #expect(isPolicyViolation(parseError(streamHeader + stanza, limits: .postAuth)))
    }

    @Test func whitespaceKeepAlivesDoNotAddUp() throws {
        let parser = XMLStreamParser()
        _ = try parser.feed(streamHeader + "<a/>")
        for _ in 0..<100 {
            #expect(try parser.feed(String(repeating: " ", count: 1000)) == [])
        }
        #expect(try parser.feed("<b/>").count == 1)
    }

    @Test func limitsCanBeRaisedAfterAuthentication() throws {
        let big = "<message><body>" + String(repeating: "x", count: 20_000) + "</body></message>"
        let parser = XMLStreamParser()
        _ = try parser.feed(streamHeader)
        parser.limits = .postAuth
        #expect(try parser.feed(big).count == 1)
        let strict = XMLStreamParser()
        _ = try strict.feed(streamHeader)
        #expect(isPolicyViolation(feedError(strict, big)))
    }

    // MARK: maxDepth

    private func nested(_ depth: Int) -> String {
        String(repeating: "<x>", count: depth) + String(repeating: "</x>", count: depth)
    }

    @Test func depthOfExactlyTheLimitPassesOneMoreFails() throws {
        let limit = XMLStreamLimits.preAuth.maxDepth
        #expect(try stanzas(nested(limit)).count == 1)
        #expect(isPolicyViolation(parseError(streamHeader + nested(limit + 1))))
        var limits = XMLStreamLimits.preAuth
        limits.maxDepth = 3
        #expect(try stanzas(nested(3), limits: limits).count == 1)
        #expect(isPolicyViolation(parseError(streamHeader + nested(4), limits: limits)))
    }

    // MARK: maxAttributes

    private func element(attributes count: Int, declarations: Int = 0) -> String {
        var tag = "<message"
        for index in 0..<count { tag += " a\(index)='v'" }
        for index in 0..<declarations { tag += " xmlns:p\(index)='urn:p\(index)'" }
        return tag + "/>"
    }

    @Test func attributesOfExactlyTheLimitPassOneMoreFails() throws {
        let limit = XMLStreamLimits.preAuth.maxAttributes
        #expect(try stanzas(element(attributes: limit)).first?.attributes.count == limit)
        #expect(isPolicyViolation(parseError(streamHeader + element(attributes: limit + 1))))
        // On a nested element too.
        let inner = "<iq>" + element(attributes: limit + 1) + "</iq>"
        #expect(isPolicyViolation(parseError(streamHeader + inner)))
    }

    @Test func namespaceDeclarationsCountAsAttributes() throws {
        let limit = XMLStreamLimits.preAuth.maxAttributes
        #expect(try stanzas(element(attributes: limit - 2, declarations: 2)).count == 1)
        #expect(isPolicyViolation(parseError(streamHeader + element(attributes: limit - 2, declarations: 3))))
        #expect(isPolicyViolation(parseError(streamHeader + element(attributes: 0, declarations: limit + 1))))
    }

    @Test func streamHeaderAttributesAreLimitedToo() {
        var header = "<stream:stream xmlns:stream='http://etherx.jabber.org/streams'"
        for index in 0..<40 { header += " a\(index)='v'" }
        #expect(isPolicyViolation(parseError(header + ">")))
    }

    // MARK: maxElementsPerStanza

    @Test func elementsOfExactlyTheLimitPassOneMoreFails() throws {
        let limit = XMLStreamLimits.preAuth.maxElementsPerStanza
        func stanza(_ elements: Int) -> String {
            "<iq>" + String(repeating: "<item/>", count: elements - 1) + "</iq>"
        }
        #expect(try stanzas(stanza(limit)).first?.childElements.count == limit - 1)
        #expect(isPolicyViolation(parseError(streamHeader + stanza(limit + 1))))
        // The count is per stanza: two stanzas at the limit are fine.
        #expect(try stanzas(stanza(limit) + stanza(limit)).count == 2)
    }

    @Test func policyViolationMessagesNameTheLimit() {
        var limits = XMLStreamLimits.preAuth
        limits.maxElementsPerStanza = 2
        let error = parseError(streamHeader + "<a><b/><c/></a>", limits: limits)
        #expect(error?.streamErrorCondition == "policy-violation")
        if case .policyViolation(let message) = error {
            #expect(message.contains("2"))
        } else {
            Issue.record("expected a policy violation, got \(String(describing: error))")
        }
    }
}
