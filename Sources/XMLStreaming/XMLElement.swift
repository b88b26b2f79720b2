/// An attribute of an ``XMLElement``.
///
/// `name` is the local name. Attributes written without a prefix have no namespace (the default
/// namespace never applies to attributes); `xml:lang` has the namespace
/// `http://www.w3.org/XML/1998/namespace` and the prefix `xml`.
public struct XMLAttribute: Sendable, Equatable {
    public var name: String
    public var namespace: String?
    public var prefix: String?
    public var value: String

    public init(name: String, namespace: String? = nil, prefix: String? = nil, value: String) {
        self.name = name
        self.namespace = namespace
        self.prefix = prefix
        self.value = value
    }
}

/// One `xmlns="…"` (`prefix == nil`) or `xmlns:prefix="…"` declaration written on an element.
/// `uri` is empty for `xmlns=""` (undeclaring the default namespace).
public struct XMLNamespaceDeclaration: Sendable, Equatable {
    public var prefix: String?
    public var uri: String

    public init(prefix: String? = nil, uri: String) {
        self.prefix = prefix
        self.uri = uri
    }
}

public enum XMLNode: Sendable, Equatable {
    case element(XMLElement)
    case text(String)
}

/// An element tree as produced by ``XMLStreamParser`` (or built by hand and written with ``serialized()``).
public struct XMLElement: Sendable, Equatable {
    /// Local name, e.g. "message", "stream".
    public var name: String
    /// Resolved namespace URI, nil if the element is in no namespace.
    public var namespace: String?
    /// Prefix as written ("stream" for `<stream:stream>`), nil if none.
    public var prefix: String?
    /// Attributes in document order, without `xmlns` / `xmlns:x` declarations.
    public var attributes: [XMLAttribute]
    /// The namespace declarations written on this element (in document order) when it was parsed.
    /// The serializer re-emits them (unless they contradict the element's own names) and adds whatever
    /// else is needed, so hand-built elements can leave this empty.
    public var namespaceDeclarations: [XMLNamespaceDeclaration]
    public var children: [XMLNode]

    public init(
        name: String,
        namespace: String? = nil,
        prefix: String? = nil,
        attributes: [XMLAttribute] = [],
        children: [XMLNode] = [],
        namespaceDeclarations: [XMLNamespaceDeclaration] = []
    ) {
        self.name = name
        self.namespace = namespace
        self.prefix = prefix
        self.attributes = attributes
        self.namespaceDeclarations = namespaceDeclarations
        self.children = children
    }

    /// The value of the unqualified (no namespace) attribute with this local name.
    public func attribute(_ name: String) -> String? {
        for attribute in attributes where attribute.namespace == nil && attribute.name == name {
            return attribute.value
        }
        return nil
    }

    /// The first child element with this local name and, unless `namespace` is nil, this namespace.
    public func firstChild(named name: String, namespace: String? = nil) -> XMLElement? {
        for case .element(let child) in children where child.name == name {
            if namespace == nil || child.namespace == namespace { return child }
        }
        return nil
    }

    /// The child elements, in order (text children skipped).
    public var childElements: [XMLElement] {
        var result: [XMLElement] = []
        for case .element(let child) in children { result.append(child) }
        return result
    }

    /// The concatenation of the direct text children.
    public var text: String {
        var result = ""
        for case .text(let string) in children { result += string }
        return result
    }
}
