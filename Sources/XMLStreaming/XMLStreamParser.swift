import CExpat

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Size limits enforced while parsing; exceeding one is a `policy-violation` stream error.
public struct XMLStreamLimits: Sendable, Equatable {
    /// Bytes of one top-level stanza, from its `<` to the end of its end tag. The same bound applies to
    /// the bytes before and including the stream's start tag, and to the bytes between two stanzas.
    public var maxStanzaBytes: Int
    /// Element depth inside a stanza (the stanza itself is depth 1).
    public var maxDepth: Int
    /// Attributes per element; namespace declarations (`xmlns`, `xmlns:x`) count too.
    public var maxAttributes: Int
    /// Elements in one stanza, the stanza itself included.
    public var maxElementsPerStanza: Int

    public init(maxStanzaBytes: Int, maxDepth: Int, maxAttributes: Int, maxElementsPerStanza: Int) {
        self.maxStanzaBytes = maxStanzaBytes
        self.maxDepth = maxDepth
        self.maxAttributes = maxAttributes
        self.maxElementsPerStanza = maxElementsPerStanza
    }

    public static let preAuth = XMLStreamLimits(
        maxStanzaBytes: 8192, maxDepth: 16, maxAttributes: 32, maxElementsPerStanza: 32)
    public static let postAuth = XMLStreamLimits(
        maxStanzaBytes: 65536, maxDepth: 32, maxAttributes: 64, maxElementsPerStanza: 4096)
}

public enum XMLStreamEvent: Sendable, Equatable {
    /// The stream's root start tag (`<stream:stream …>`): names, attributes and namespace
    /// declarations, no children. Emitted for any root element; the caller checks name and namespace.
    case streamOpen(XMLElement)
    /// One complete child of the stream root, with its whole tree.
    case stanza(XMLElement)
    /// The end tag of the stream root.
    case streamClose
}

public enum XMLStreamError: Error, Sendable, Equatable, CustomStringConvertible {
    /// DOCTYPE, entity or notation declarations, comments, processing instructions, external entities.
    case restrictedXML(String)
    /// Not well-formed: expat's error text and position.
    case invalidXML(String)
    /// A limit in ``XMLStreamLimits`` was exceeded.
    case policyViolation(String)

    /// The RFC 6120 stream error condition to send.
    public var streamErrorCondition: String {
        switch self {
        case .restrictedXML: return "restricted-xml"
        case .invalidXML: return "invalid-xml"
        case .policyViolation: return "policy-violation"
        }
    }

    public var description: String {
        switch self {
        case .restrictedXML(let message), .invalidXML(let message), .policyViolation(let message):
            return "\(streamErrorCondition): \(message)"
        }
    }
}

/// `XML_SetReparseDeferralEnabled` appeared in expat 2.6.0. Deferral would hold back a complete stanza
/// that arrives in small pieces, so it is switched off where the linked expat has it (looked up at run
/// time: this package builds against 2.5.0 as well).
private let setReparseDeferralEnabledAddress: UInt = {
    guard let handle = dlopen(nil, RTLD_NOW),
          let symbol = dlsym(handle, "XML_SetReparseDeferralEnabled")
    else { return 0 }
    return UInt(bitPattern: symbol)
}()

private typealias SetReparseDeferralEnabled = @convention(c) (OpaquePointer?, UInt8) -> UInt8

/// Incremental parser for one XMPP stream (one per connection), built on expat.
///
/// Not thread-safe; use it from one event loop. Every error thrown by the `feed` functions is an
/// ``XMLStreamError``; after one is thrown the parser is dead and every later `feed` throws it again
/// (``reset()`` does not revive it).
///
/// Pause / restart contract: when a stanza for which ``pauseAfter`` returns true completes, parsing
/// stops right after its end tag, `feed` returns the events so far (that stanza last) and ``isPaused``
/// is true. The unparsed rest of the input is kept. While paused, `feed` only appends its bytes to
/// that rest and returns `[]`. ``reset()`` starts a new document (a new `<stream:stream>`) and
/// ``resume()`` continues the same one; either way the kept bytes are parsed by the next `feed` call
/// (an empty one is fine) before that call's own bytes.
public final class XMLStreamParser {
    /// The limits in force; may be changed at any time (e.g. to `.postAuth` after authentication).
    public var limits: XMLStreamLimits
    /// See the type's documentation.
    public var pauseAfter: (@Sendable (XMLElement) -> Bool)?
    public var isPaused: Bool { paused }

    /// nil while hibernating (see `hibernate()`); created again by the next `feed`.
    private var parser: OpaquePointer!
    /// The root's start tag with its namespace declarations, to put a new expat parser back inside
    /// the stream after hibernation.
    private var rootStartTag: [UInt8] = []
    /// Parsing `rootStartTag` after hibernation: no event for it.
    private var priming = false
    private var failure: XMLStreamError?
    private var events: [XMLStreamEvent] = []

    // State of the current document. Byte positions are absolute offsets in the document.
    private var depth = 0                  // open elements; the root is depth 1, stanzas depth 2
    private var rootClosed = false
    private var stack: [XMLElement] = []   // the open elements of the current stanza; empty between stanzas
    private var text: [UInt8] = []         // pending character data of stack.last
    private var pendingDeclarations: [XMLNamespaceDeclaration] = []
    private var stanzaStart = 0            // position of the current stanza's '<'
    private var boundary = 0               // end of the last event outside stanzas
    private var elementsInStanza = 0
    private var fedToExpat = 0             // bytes handed to expat in this document

    // Pause state.
    private var paused = false
    private var expatSuspended = false
    private var pauseEnd = 0               // position right after the stanza that paused
    private var retained: [UInt8] = []    // bytes after pauseEnd, not parsed yet
    private var retainedStart = 0          // position of retained[0] while expat still holds some of it
    private var retainedInExpat = 0        // how many leading bytes of `retained` expat holds (suspended)
    private var bytesWhilePaused = 0

    private var namespaceCache: [String] = []

    /// Input is handed to expat in slices of at most this size, so the size limits are checked often
    /// and expat never buffers much more than a limit's worth of an unfinished token.
    private static let sliceSize = 16 * 1024

    public init(limits: XMLStreamLimits = .preAuth) {
        self.limits = limits
        makeExpatParser()
    }

    deinit {
        if let parser { XML_ParserFree(parser) }
    }

    /// Whether the expat parser is freed (an idle stream between stanzas).
    public var isHibernating: Bool { parser == nil }

    /// Frees the expat parser and the buffers kept between stanzas, if the stream stands between two
    /// stanzas with nothing unparsed: an idle connection then holds no parser memory (several KiB).
    /// The next `feed` creates a parser again and puts it back inside the stream (same root element,
    /// same namespace declarations) before parsing its bytes. Returns whether it hibernated.
    @discardableResult
    public func hibernate() -> Bool {
        guard let parser, failure == nil, !paused, !expatSuspended, retained.isEmpty, depth == 1, !rootClosed,
              stack.isEmpty, boundary == fedToExpat, !rootStartTag.isEmpty else { return false }
        XML_ParserFree(parser)
        self.parser = nil
        text = []
        stack = []
        pendingDeclarations = []
        events = []
        return true
    }

    /// After hibernation: a new expat parser, inside the root element again, positions restarted.
    private func wake() -> XMLStreamError? {
        makeExpatParser()
        depth = 0
        priming = true
        defer { priming = false }
        let status = rootStartTag.withUnsafeBytes { raw in
            XML_Parse(parser, raw.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(raw.count), 0)
        }
        if status != XML_STATUS_OK || depth != 1 {
            return fail(failure ?? .invalidXML("could not resume the stream after hibernation"))
        }
        fedToExpat = rootStartTag.count
        boundary = fedToExpat
        return nil
    }

    // MARK: Public API

    public func feed(_ bytes: UnsafeRawBufferPointer) throws(XMLStreamError) -> [XMLStreamEvent] {
        var result: [XMLStreamEvent] = []
        try feed(bytes, into: &result)
        return result
    }

    /// Like `feed(_:)`, but the events replace the contents of `out`, whose storage is reused: a
    /// caller that keeps one array allocates nothing per call for the event list.
    public func feed(_ bytes: UnsafeRawBufferPointer, into out: inout [XMLStreamEvent]) throws(XMLStreamError) {
        out.removeAll(keepingCapacity: true)
        if let failure { throw failure }
        swap(&out, &events)  // events: the caller's empty storage; out: ours (empty)
        let error = process(bytes)
        swap(&out, &events)  // out: the events; events: empty again
        if let error {
            out.removeAll(keepingCapacity: true)
            throw error
        }
    }

    public func feed(_ bytes: [UInt8]) throws(XMLStreamError) -> [XMLStreamEvent] {
        let result: Result<[XMLStreamEvent], XMLStreamError> = bytes.withUnsafeBytes { buffer in
            do throws(XMLStreamError) { return .success(try feed(buffer)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    public func feed(_ string: String) throws(XMLStreamError) -> [XMLStreamEvent] {
        var string = string
        let result: Result<[XMLStreamEvent], XMLStreamError> = string.withUTF8 { buffer in
            do throws(XMLStreamError) {
                return .success(try feed(UnsafeRawBufferPointer(buffer)))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Starts a new XML document: a new `<stream:stream>` is expected next. Bytes kept by a pause are
    /// parsed (as the start of the new document) by the next `feed`, before its own bytes. Without a
    /// pause, any unfinished input of the old document is dropped.
    public func reset() {
        if let parser { XML_ParserFree(parser) }
        makeExpatParser()
        rootStartTag = []
        depth = 0
        rootClosed = false
        stack.removeAll()
        text.removeAll()
        pendingDeclarations.removeAll()
        stanzaStart = 0
        boundary = 0
        elementsInStanza = 0
        fedToExpat = 0
        paused = false
        expatSuspended = false
        retainedInExpat = 0
        bytesWhilePaused = 0
        events.removeAll()
    }

    /// Leaves the paused state without starting a new document (e.g. after a failed SASL attempt):
    /// the next `feed` continues the same document with the kept bytes first. No effect if not paused.
    public func resume() {
        paused = false
    }

    // MARK: Driving expat

    /// A new expat parser, with this object's handlers, as `parser`.
    private func makeExpatParser() {
        // The encoding argument overrides any encoding declaration: XMPP is UTF-8 only.
        guard let created = XML_ParserCreateNS("UTF-8", CChar(1)) else {
            fatalError("XMLStreamParser: expat could not allocate a parser")
        }
        parser = created
        configure()
    }

    private func process(_ input: UnsafeRawBufferPointer) -> XMLStreamError? {
        if parser == nil {
            if input.isEmpty { return nil }
            if let error = wake() { return error }
        }
        if paused {
            if !input.isEmpty {
                bytesWhilePaused += input.count
                if bytesWhilePaused > limits.maxStanzaBytes {
                    return fail(.policyViolation(
                        "more than \(limits.maxStanzaBytes) bytes received while the stream is paused"))
                }
                retained.append(contentsOf: input)
            }
            return nil
        }
        if expatSuspended {
            // resume() was called: expat still holds the first `retainedInExpat` bytes of `retained`.
            expatSuspended = false
            let status = XML_ResumeParser(parser)
            if status == XML_STATUS_ERROR { return fail(expatError()) }
            if status == XML_STATUS_SUSPENDED {
                let consumed = pauseEnd - retainedStart
                retained.removeFirst(consumed)
                retainedInExpat -= consumed
                retainedStart = pauseEnd
                expatSuspended = true
                bytesWhilePaused = 0
                if !input.isEmpty { retained.append(contentsOf: input) }
                return nil
            }
            retained.removeFirst(retainedInExpat)
            retainedInExpat = 0
            if let error = checkUnfinishedInput() { return fail(error) }
        }
        if !retained.isEmpty {
            var buffer: [UInt8] = []
            swap(&buffer, &retained)
            buffer.append(contentsOf: input)
            return buffer.withUnsafeBytes { parse($0) }
        }
        return parse(input)
    }

    private func parse(_ input: UnsafeRawBufferPointer) -> XMLStreamError? {
        guard let base = input.baseAddress else { return nil }
        let bytes = base.assumingMemoryBound(to: CChar.self)
        var offset = 0
        while offset < input.count {
            let length = min(XMLStreamParser.sliceSize, input.count - offset)
            let sliceStart = fedToExpat
            let status = XML_Parse(parser, bytes + offset, Int32(length), 0)
            fedToExpat += length
            if status == XML_STATUS_ERROR {
                return fail(declarationInContent(input, sliceOffset: offset, sliceStart: sliceStart) ?? expatError())
            }
            if status == XML_STATUS_SUSPENDED {
                // Paused by endElement: keep everything after the stanza.
                let consumed = max(0, pauseEnd - sliceStart)
                retained = Array(input[(offset + consumed)...])
                retainedStart = pauseEnd
                retainedInExpat = length - consumed
                expatSuspended = true
                bytesWhilePaused = 0
                return nil
            }
            if let error = checkUnfinishedInput() { return fail(error) }
            offset += length
        }
        return nil
    }

    /// A DOCTYPE or ENTITY declaration sent after the stream header is a syntax error to expat; it is the
    /// XML-bomb shape all the same, so it is reported as restricted XML like one in the prolog.
    private func declarationInContent(_ input: UnsafeRawBufferPointer, sliceOffset: Int, sliceStart: Int) -> XMLStreamError? {
        if failure != nil { return nil }
        let at = Int(XML_GetCurrentByteIndex(parser)) - sliceStart + sliceOffset
        // expat reports the error at or just after the "<!"; look at the few bytes around it. The index
        // can lie outside this input (an error found in bytes of an earlier piece, or at its end): both
        // bounds are clamped into it (a fuzzer found the crash an unclamped window made).
        let lower = min(max(0, at - 12), input.count)
        let upper = min(max(lower, at + 12), input.count)
        let window = input[lower..<upper]
        let text = String(decoding: window, as: UTF8.self)
        guard text.contains("<!DOCTYPE") || text.contains("<!ENTITY") else { return nil }
        return .restrictedXML("markup declaration (<!…) inside the stream")
    }

    /// Catches a stanza (or stream header) that grows past the limit before expat reports its end,
    /// e.g. a huge text node or a never-ending start tag arriving in small pieces.
    private func checkUnfinishedInput() -> XMLStreamError? {
        if rootClosed { return nil }
        let start = stack.isEmpty ? boundary : stanzaStart
        let size = fedToExpat - start
        if size > limits.maxStanzaBytes {
            return .policyViolation(
                stack.isEmpty
                    ? "more than \(limits.maxStanzaBytes) bytes without a complete tag"
                    : "stanza exceeds \(limits.maxStanzaBytes) bytes")
        }
        return nil
    }

    @discardableResult
    private func fail(_ error: XMLStreamError) -> XMLStreamError {
        if let failure { return failure }
        failure = error
        return error
    }

    private func expatError() -> XMLStreamError {
        if let failure { return failure }
        let code = XML_GetErrorCode(parser)
        let message = XML_ErrorString(code).map { String(cString: $0) } ?? "error \(code.rawValue)"
        let line = XML_GetCurrentLineNumber(parser)
        let column = XML_GetCurrentColumnNumber(parser)
        let text = "\(message) at line \(line), column \(column)"
        switch code {
        case XML_ERROR_EXTERNAL_ENTITY_HANDLING, XML_ERROR_ENTITY_DECLARED_IN_PE, XML_ERROR_NOT_STANDALONE,
             XML_ERROR_BINARY_ENTITY_REF, XML_ERROR_RECURSIVE_ENTITY_REF, XML_ERROR_AMPLIFICATION_LIMIT_BREACH:
            return .restrictedXML(text)
        default:
            return .invalidXML(text)
        }
    }

    /// Called from a handler: records the error and aborts expat (XML_Parse then returns an error).
    private func stop(_ error: XMLStreamError) {
        if failure == nil { failure = error }
        XML_StopParser(parser, 0)
    }

    private func policy(_ message: String) {
        stop(.policyViolation(message))
    }

    private func restrict(_ message: String) {
        stop(.restrictedXML(message))
    }

    @inline(__always) private var eventStart: Int {
        Int(XML_GetCurrentByteIndex(parser))
    }

    @inline(__always) private var eventEnd: Int {
        Int(XML_GetCurrentByteIndex(parser)) + Int(XML_GetCurrentByteCount(parser))
    }

    // MARK: Handlers

    private func configure() {
        let parser = self.parser
        XML_SetUserData(parser, Unmanaged.passUnretained(self).toOpaque())
        XML_SetReturnNSTriplet(parser, 1)
        XML_SetParamEntityParsing(parser, XML_PARAM_ENTITY_PARSING_NEVER)
        if setReparseDeferralEnabledAddress != 0 {
            let function = unsafeBitCast(
                UnsafeRawPointer(bitPattern: setReparseDeferralEnabledAddress)!, to: SetReparseDeferralEnabled.self)
            _ = function(parser, 0)
        }

        XML_SetStartNamespaceDeclHandler(parser) { userData, prefix, uri in
            XMLStreamParser.instance(userData).namespaceDeclaration(prefix: prefix, uri: uri)
        }
        XML_SetElementHandler(
            parser,
            { userData, name, attributes in
                XMLStreamParser.instance(userData).startElement(name: name!, attributes: attributes!)
            },
            { userData, _ in
                XMLStreamParser.instance(userData).endElement()
            })
        XML_SetCharacterDataHandler(parser) { userData, characters, length in
            XMLStreamParser.instance(userData).characterData(characters!, Int(length))
        }

        // Everything below is refused: restricted-xml.
        XML_SetCommentHandler(parser) { userData, _ in
            XMLStreamParser.instance(userData).restrict("comments are not allowed")
        }
        XML_SetProcessingInstructionHandler(parser) { userData, _, _ in
            XMLStreamParser.instance(userData).restrict("processing instructions are not allowed")
        }
        XML_SetStartDoctypeDeclHandler(parser) { userData, _, _, _, _ in
            XMLStreamParser.instance(userData).restrict("DOCTYPE declarations are not allowed")
        }
        XML_SetEntityDeclHandler(parser) { userData, _, _, _, _, _, _, _, _ in
            XMLStreamParser.instance(userData).restrict("entity declarations are not allowed")
        }
        XML_SetUnparsedEntityDeclHandler(parser) { userData, _, _, _, _, _ in
            XMLStreamParser.instance(userData).restrict("unparsed entity declarations are not allowed")
        }
        XML_SetNotationDeclHandler(parser) { userData, _, _, _, _ in
            XMLStreamParser.instance(userData).restrict("notation declarations are not allowed")
        }
        XML_SetSkippedEntityHandler(parser) { userData, _, _ in
            XMLStreamParser.instance(userData).restrict("entity references are not allowed")
        }
        // Never load anything: expat fails with XML_ERROR_EXTERNAL_ENTITY_HANDLING (mapped to restricted-xml).
        XML_SetExternalEntityRefHandler(parser) { _, _, _, _, _ in 0 }
    }

    @inline(__always)
    private static func instance(_ userData: UnsafeMutableRawPointer?) -> XMLStreamParser {
        Unmanaged<XMLStreamParser>.fromOpaque(userData!).takeUnretainedValue()
    }

    private func namespaceDeclaration(prefix: UnsafePointer<CChar>?, uri: UnsafePointer<CChar>?) {
        if failure != nil { return }
        if pendingDeclarations.count >= limits.maxAttributes {
            return policy("more than \(limits.maxAttributes) attributes on one element")
        }
        pendingDeclarations.append(XMLNamespaceDeclaration(
            prefix: prefix.map { String(cString: $0) },
            uri: uri.map { intern(XMLStreamParser.bytes(of: $0)) } ?? ""))
    }

    private func startElement(name: UnsafePointer<CChar>, attributes: UnsafeMutablePointer<UnsafePointer<CChar>?>) {
        if failure != nil { return }
        if !stack.isEmpty { flushText() }
        depth += 1

        var attributeCount = 0
        while attributes[2 * attributeCount] != nil { attributeCount += 1 }
        if attributeCount + pendingDeclarations.count > limits.maxAttributes {
            return policy("more than \(limits.maxAttributes) attributes on one element")
        }
        if depth >= 2 {
            if depth == 2 {
                stanzaStart = eventStart
                elementsInStanza = 0
            }
            elementsInStanza += 1
            if elementsInStanza > limits.maxElementsPerStanza {
                return policy("more than \(limits.maxElementsPerStanza) elements in one stanza")
            }
            if depth - 1 > limits.maxDepth {
                return policy("elements nested deeper than \(limits.maxDepth) levels")
            }
            if eventEnd - stanzaStart > limits.maxStanzaBytes {
                return policy("stanza exceeds \(limits.maxStanzaBytes) bytes")
            }
        }

        let (local, namespace, prefix) = split(name)
        var element = XMLElement(name: local, namespace: namespace, prefix: prefix)
        if attributeCount > 0 {
            element.attributes.reserveCapacity(attributeCount)
            for index in 0..<attributeCount {
                let (attributeName, attributeNamespace, attributePrefix) = split(attributes[2 * index]!)
                element.attributes.append(XMLAttribute(
                    name: attributeName, namespace: attributeNamespace, prefix: attributePrefix,
                    value: String(cString: attributes[2 * index + 1]!)))
            }
        }
        if !pendingDeclarations.isEmpty {
            element.namespaceDeclarations = pendingDeclarations
            pendingDeclarations.removeAll(keepingCapacity: true)
        }

        if depth == 1 {
            boundary = eventEnd
            if priming { return }
            rootStartTag = Self.startTag(element)
            events.append(.streamOpen(element))
        } else {
            stack.append(element)
        }
    }

    /// `<prefix:name xmlns…="…">`: what a new parser needs to read the rest of the stream.
    private static func startTag(_ element: XMLElement) -> [UInt8] {
        var tag = "<" + (element.prefix.map { $0 + ":" } ?? "") + element.name
        for declaration in element.namespaceDeclarations {
            tag += " xmlns" + (declaration.prefix.map { ":" + $0 } ?? "")
            tag += "=\"" + XMLEscaping.escapeAttribute(declaration.uri) + "\""
        }
        return Array((tag + ">").utf8)
    }

    private func endElement() {
        if failure != nil { return }
        defer { depth -= 1 }
        if depth == 1 {
            boundary = eventEnd
            rootClosed = true
            events.append(.streamClose)
            return
        }
        flushText()
        let element = stack.removeLast()
        if depth > 2 {
            stack[stack.count - 1].children.append(.element(element))
            return
        }
        let end = eventEnd
        if end - stanzaStart > limits.maxStanzaBytes {
            return policy("stanza exceeds \(limits.maxStanzaBytes) bytes")
        }
        boundary = end
        events.append(.stanza(element))
        if let pauseAfter, pauseAfter(element) {
            pauseEnd = end
            paused = true
            XML_StopParser(parser, 1)
        }
    }

    private func characterData(_ characters: UnsafePointer<CChar>, _ length: Int) {
        if failure != nil { return }
        if stack.isEmpty {
            // Text between stanzas (normally whitespace keep-alives) is dropped.
            if depth == 1 { boundary = eventEnd }
            return
        }
        if eventEnd - stanzaStart > limits.maxStanzaBytes {
            return policy("stanza exceeds \(limits.maxStanzaBytes) bytes")
        }
        text.append(contentsOf: UnsafeRawBufferPointer(start: characters, count: length))
    }

    private func flushText() {
        if text.isEmpty { return }
        stack[stack.count - 1].children.append(.text(String(decoding: text, as: UTF8.self)))
        text.removeAll(keepingCapacity: text.count <= 4096)
    }

    // MARK: Names

    @inline(__always)
    private static func bytes(of string: UnsafePointer<CChar>) -> UnsafeBufferPointer<UInt8> {
        let start = UnsafeRawPointer(string).assumingMemoryBound(to: UInt8.self)
        var count = 0
        while start[count] != 0 { count += 1 }
        return UnsafeBufferPointer(start: start, count: count)
    }

    /// Splits expat's "uri\u{1}local\u{1}prefix" / "uri\u{1}local" / "local".
    private func split(_ name: UnsafePointer<CChar>) -> (local: String, namespace: String?, prefix: String?) {
        let bytes = XMLStreamParser.bytes(of: name)
        var first = -1
        var second = -1
        for index in 0..<bytes.count where bytes[index] == 1 {
            if first < 0 {
                first = index
            } else {
                second = index
                break
            }
        }
        if first < 0 { return (String(decoding: bytes, as: UTF8.self), nil, nil) }
        let namespace = intern(UnsafeBufferPointer(rebasing: bytes[..<first]))
        if second < 0 {
            return (String(decoding: UnsafeBufferPointer(rebasing: bytes[(first + 1)...]), as: UTF8.self),
                    namespace, nil)
        }
        return (String(decoding: UnsafeBufferPointer(rebasing: bytes[(first + 1)..<second]), as: UTF8.self),
                namespace,
                String(decoding: UnsafeBufferPointer(rebasing: bytes[(second + 1)...]), as: UTF8.self))
    }

    /// Namespace URIs repeat on every stanza; reuse the String instead of allocating a new one.
    private func intern(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        // memcmp: the generic `elementsEqual` walked both a byte at a time (1 % of the upstream loop).
        for cached in namespaceCache where cached.utf8.count == bytes.count {
            let same = bytes.isEmpty || cached.utf8.withContiguousStorageIfAvailable { c in
                memcmp(c.baseAddress!, bytes.baseAddress!, c.count) == 0
            } ?? cached.utf8.elementsEqual(bytes)
            if same { return cached }
        }
        let string = String(decoding: bytes, as: UTF8.self)
        if namespaceCache.count < 16 { namespaceCache.append(string) }
        return string
    }
}
