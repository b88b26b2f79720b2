/// Escaping helpers for building XML from string templates.
///
/// Both functions also replace characters that XML 1.0 cannot carry at all (C0 controls other than
/// tab, line feed and carriage return; U+FFFE; U+FFFF) with U+FFFD, so their output is always
/// well-formed.
public enum XMLEscaping {
    /// Escapes `&`, `<`, `>` (and a carriage return as `&#13;`, which a parser would otherwise
    /// turn into a line feed) for use as element text.
    public static func escapeText(_ string: String) -> String {
        escape(string, attribute: false)
    }

    /// Escapes `&`, `<`, `>`, `"` and tab / line feed / carriage return (as character references, so
    /// attribute-value normalization keeps them) for use inside a double-quoted attribute value.
    public static func escapeAttribute(_ string: String) -> String {
        escape(string, attribute: true)
    }

    static func escape(_ string: String, attribute: Bool) -> String {
        if !mayNeedWork(string, attribute: attribute) { return string }
        var out: [UInt8] = []
        out.reserveCapacity(string.utf8.count + 16)
        append(string, attribute: attribute, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Bytes that need a look: 1 for text and attributes, 2 for attributes only.
    private static let interesting: [UInt8] = {
        var table = [UInt8](repeating: 0, count: 256)
        for b in 0..<0x20 { table[b] = 1 }
        table[Int(UInt8(ascii: "\n"))] = 2
        table[Int(UInt8(ascii: "\t"))] = 2
        table[Int(UInt8(ascii: "\""))] = 2
        for c in ["&", "<", ">", "\r"] { table[Int(c.utf8.first!)] = 1 }
        table[0xEF] = 1  // possibly U+FFFE / U+FFFF
        return table
    }()

    /// One pass over the bytes with a table (the common case: nothing to escape, no copy made). The
    /// table is fetched once per string: read inside the closure, its lazy global's `swift_once` ran
    /// for every byte (1–2 % of the event loop, payloads to devices and app servers).
    @inline(__always)
    static func mayNeedWork(_ string: String, attribute: Bool) -> Bool {
        let mask: UInt8 = attribute ? 3 : 1
        return interesting.withUnsafeBufferPointer { table in
            let hit: (UInt8) -> Bool = { table[Int($0)] & mask != 0 }
            return string.utf8.withContiguousStorageIfAvailable { $0.contains(where: hit) }
                ?? string.utf8.contains(where: hit)
        }
    }

    private static let replacementCharacter: [UInt8] = [0xEF, 0xBF, 0xBD]

    static func append(_ string: String, attribute: Bool, to out: inout [UInt8]) {
        let utf8 = string.utf8
        var index = utf8.startIndex
        let end = utf8.endIndex
        while index != end {
            let byte = utf8[index]
            switch byte {
            case UInt8(ascii: "&"): out.append(contentsOf: "&amp;".utf8)
            case UInt8(ascii: "<"): out.append(contentsOf: "&lt;".utf8)
            case UInt8(ascii: ">"): out.append(contentsOf: "&gt;".utf8)
            case UInt8(ascii: "\r"): out.append(contentsOf: "&#13;".utf8)
            case UInt8(ascii: "\"") where attribute: out.append(contentsOf: "&quot;".utf8)
            case UInt8(ascii: "\n") where attribute: out.append(contentsOf: "&#10;".utf8)
            case UInt8(ascii: "\t") where attribute: out.append(contentsOf: "&#9;".utf8)
            case UInt8(ascii: "\n"), UInt8(ascii: "\t"): out.append(byte)
            case 0..<0x20: out.append(contentsOf: replacementCharacter)
            case 0xEF:
                // U+FFFE and U+FFFF (EF BF BE / EF BF BF) are not XML characters.
                let second = utf8.index(after: index)
                if second != end, utf8[second] == 0xBF {
                    let third = utf8.index(after: second)
                    if third != end, utf8[third] == 0xBE || utf8[third] == 0xBF {
                        out.append(contentsOf: replacementCharacter)
                        index = utf8.index(after: third)
                        continue
                    }
                }
                out.append(byte)
            default: out.append(byte)
            }
            index = utf8.index(after: index)
        }
    }
}

let xmlNamespaceURI = "http://www.w3.org/XML/1998/namespace"

extension XMLElement {
    /// Compact XML for this element: no added whitespace, no XML declaration, attributes in order in
    /// double quotes, empty elements as `<name/>`.
    ///
    /// Namespaces: nothing is in scope at the top. The element's own `namespaceDeclarations` are written
    /// (unless they contradict its name or its attributes' names), then `xmlns="…"` is added when the
    /// element's namespace differs from the default namespace in scope (`xmlns=""` for an element in no
    /// namespace under a default namespace), and `xmlns:p="…"` for a prefixed element or attribute whose
    /// prefix is not bound to its namespace in scope. A prefix on an element without a namespace is
    /// ignored; an attribute with a namespace but no usable prefix gets a generated one (`ns1`, …).
    public func serialized() -> String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        var scope = NamespaceScope()
        serialize(into: &out, scope: &scope)
        return String(decoding: out, as: UTF8.self)
    }

    func serialize(into out: inout [UInt8], scope: inout NamespaceScope) {
        let mark = scope.bindings.count
        defer { scope.bindings.removeSubrange(mark...) }

        let elementNamespace = (namespace?.isEmpty ?? true) ? nil : namespace
        var elementPrefix: String? = nil
        if elementNamespace != nil, let prefix, !prefix.isEmpty, prefix != "xmlns" { elementPrefix = prefix }

        var qualifiedName = name
        if let elementPrefix { qualifiedName = elementPrefix + ":" + name }
        out.append(UInt8(ascii: "<"))
        out.append(contentsOf: qualifiedName.utf8)

        // 1. Declarations written on the element when it was parsed, unless they contradict it.
        keepParsedDeclarations(into: &out, scope: &scope, mark: mark, elementPrefix: elementPrefix, elementNamespace: elementNamespace)
        // 2. The element's own name.
        if let elementPrefix {
            if scope.lookup(elementPrefix) != elementNamespace { Self.declare(elementPrefix, elementNamespace!, into: &out, scope: &scope) }
        } else {
            let wanted = elementNamespace ?? ""
            if (scope.lookup("") ?? "") != wanted { Self.declare("", wanted, into: &out, scope: &scope) }
        }
        // 3. Attribute prefixes, then the attributes.
        let attributePrefixes = bindAttributePrefixes(into: &out, scope: &scope, mark: mark, elementPrefix: elementPrefix)
        for (attribute, prefix) in zip(attributes, attributePrefixes) {
            out.append(UInt8(ascii: " "))
            if let prefix {
                out.append(contentsOf: prefix.utf8)
                out.append(UInt8(ascii: ":"))
            }
            out.append(contentsOf: attribute.name.utf8)
            out.append(contentsOf: "=\"".utf8)
            XMLEscaping.append(attribute.value, attribute: true, to: &out)
            out.append(UInt8(ascii: "\""))
        }

        if children.isEmpty {
            out.append(contentsOf: "/>".utf8)
            return
        }
        out.append(UInt8(ascii: ">"))
        for child in children {
            switch child {
            case .text(let string):
                XMLEscaping.append(string, attribute: false, to: &out)
            case .element(let element):
                element.serialize(into: &out, scope: &scope)
            }
        }
        out.append(contentsOf: "</".utf8)
        out.append(contentsOf: qualifiedName.utf8)
        out.append(UInt8(ascii: ">"))
    }

    /// Writes one namespace declaration and brings it into scope.
    static func declare(_ prefix: String, _ uri: String, into out: inout [UInt8], scope: inout NamespaceScope) {
        scope.bindings.append((prefix, uri))
        if prefix.isEmpty {
            out.append(contentsOf: " xmlns=\"".utf8)
        } else {
            out.append(contentsOf: " xmlns:".utf8)
            out.append(contentsOf: prefix.utf8)
            out.append(contentsOf: "=\"".utf8)
        }
        XMLEscaping.append(uri, attribute: true, to: &out)
        out.append(UInt8(ascii: "\""))
    }

    /// The declarations the element carried when parsed, less those that would contradict its own
    /// name or its attributes, duplicates, and undeclarations (XML 1.0 has none for prefixes).
    private func keepParsedDeclarations(into out: inout [UInt8], scope: inout NamespaceScope, mark: Int,
                                        elementPrefix: String?, elementNamespace: String?) {
        for declaration in namespaceDeclarations {
            let prefix = declaration.prefix ?? ""
            let uri = declaration.uri
            if prefix == "xml" || prefix == "xmlns" { continue }
            if !prefix.isEmpty && uri.isEmpty { continue }  // cannot undeclare a prefix in XML 1.0
            if scope.isBound(prefix, since: mark) { continue }  // duplicate
            if prefix.isEmpty {
                if elementPrefix == nil && uri != (elementNamespace ?? "") { continue }
            } else {
                if prefix == elementPrefix && uri != elementNamespace { continue }
                if attributes.contains(where: { $0.prefix == prefix && $0.namespace != nil && $0.namespace != uri }) {
                    continue
                }
            }
            Self.declare(prefix, uri, into: &out, scope: &scope)
        }
    }

    /// The prefix each attribute is written with (nil: none), declaring any it needs: its own when
    /// usable, else one already bound to its namespace, else a generated `nsN`.
    private func bindAttributePrefixes(into out: inout [UInt8], scope: inout NamespaceScope, mark: Int,
                                       elementPrefix: String?) -> [String?] {
        var attributePrefixes: [String?] = []
        attributePrefixes.reserveCapacity(attributes.count)
        for attribute in attributes {
            guard let ns = attribute.namespace, !ns.isEmpty else {
                attributePrefixes.append(nil)
                continue
            }
            if ns == xmlNamespaceURI {
                attributePrefixes.append("xml")
                continue
            }
            var prefix = attribute.prefix ?? ""
            let usable = !prefix.isEmpty && prefix != "xml" && prefix != "xmlns"
                && (scope.lookup(prefix) == ns
                    || (!scope.isBound(prefix, since: mark) && prefix != elementPrefix))
            if !usable {
                if let existing = scope.prefix(boundTo: ns) {
                    prefix = existing
                } else {
                    var counter = 1
                    repeat {
                        prefix = "ns\(counter)"
                        counter += 1
                    } while scope.isBound(prefix, since: mark)
                }
            }
            if scope.lookup(prefix) != ns { Self.declare(prefix, ns, into: &out, scope: &scope) }
            attributePrefixes.append(prefix)
        }
        return attributePrefixes
    }
}

/// Prefix bindings in scope while serializing; "" is the default namespace ("" as URI = none).
struct NamespaceScope {
    var bindings: [(prefix: String, uri: String)] = []

    func lookup(_ prefix: String) -> String? {
        for binding in bindings.reversed() where binding.prefix == prefix { return binding.uri }
        return nil
    }

    /// Whether `prefix` was declared on the current element (bindings from index `mark` on).
    func isBound(_ prefix: String, since mark: Int) -> Bool {
        bindings[mark...].contains { $0.prefix == prefix }
    }

    /// A non-default prefix whose binding in scope is `uri`.
    func prefix(boundTo uri: String) -> String? {
        for binding in bindings.reversed() where !binding.prefix.isEmpty && binding.uri == uri {
            if lookup(binding.prefix) == uri { return binding.prefix }
        }
        return nil
    }
}
