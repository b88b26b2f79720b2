import Testing
import XMLStreaming

let streamsNS = "http://etherx.jabber.org/streams"
let saslNS = "urn:ietf:params:xml:ns:xmpp-sasl"
let gcmNS = "google:mobile:data"

let streamHeader =
    "<?xml version='1.0'?><stream:stream to='gcm.googleapis.com' version='1.0' "
    + "xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>"

/// The `.streamOpen` element produced by `streamHeader`.
let expectedStreamElement = XMLElement(
    name: "stream", namespace: streamsNS, prefix: "stream",
    attributes: [
        XMLAttribute(name: "to", value: "gcm.googleapis.com"),
        XMLAttribute(name: "version", value: "1.0"),
    ],
    namespaceDeclarations: [
        XMLNamespaceDeclaration(prefix: nil, uri: "jabber:client"),
        XMLNamespaceDeclaration(prefix: "stream", uri: streamsNS),
    ])

/// Feeds everything in one call.
func parse(_ input: String, limits: XMLStreamLimits = .preAuth) throws(XMLStreamError) -> [XMLStreamEvent] {
    try XMLStreamParser(limits: limits).feed(input)
}

/// The stanzas of a document made of `streamHeader` + `body`.
func stanzas(_ body: String, limits: XMLStreamLimits = .preAuth) throws(XMLStreamError) -> [XMLElement] {
    try parse(streamHeader + body, limits: limits).compactMap { event in
        if case .stanza(let element) = event { return element }
        return nil
    }
}

/// The error thrown by feeding `input` (nil if none).
func feedError(_ parser: XMLStreamParser, _ input: String) -> XMLStreamError? {
    do {
        _ = try parser.feed(input)
        return nil
    } catch {
        return error
    }
}

func feedError(_ parser: XMLStreamParser, _ input: [UInt8]) -> XMLStreamError? {
    do {
        _ = try parser.feed(input)
        return nil
    } catch {
        return error
    }
}

func parseError(_ input: String, limits: XMLStreamLimits = .preAuth) -> XMLStreamError? {
    feedError(XMLStreamParser(limits: limits), input)
}

func isRestricted(_ error: XMLStreamError?) -> Bool {
    if case .restrictedXML = error { return true }
    return false
}

func isInvalid(_ error: XMLStreamError?) -> Bool {
    if case .invalidXML = error { return true }
    return false
}

func isPolicyViolation(_ error: XMLStreamError?) -> Bool {
    if case .policyViolation = error { return true }
    return false
}

/// Removes the namespace declarations from a tree (to compare trees by meaning only).
func withoutDeclarations(_ element: XMLElement) -> XMLElement {
    var copy = element
    copy.namespaceDeclarations = []
    copy.children = element.children.map { child in
        if case .element(let inner) = child { return .element(withoutDeclarations(inner)) }
        return child
    }
    return copy
}

/// Deterministic generator for the random chunking tests.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
