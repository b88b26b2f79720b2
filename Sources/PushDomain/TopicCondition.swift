/// A parsed `condition` for topic messages, e.g.
/// `'TopicA' in topics && ('TopicB' in topics || 'TopicC' in topics)`.
///
/// Grammar (operators bind `!` > `&&` > `||`, as in C and in FCM):
/// ```
/// condition := or
/// or        := and ( "||" and )*
/// and       := unary ( "&&" unary )*
/// unary     := "!" unary | "(" or ")" | NAME "in" "topics"
/// NAME      := 'topic' | "topic"        (characters [a-zA-Z0-9-_.~%])
/// ```
/// `in` and `topics` are matched case-insensitively; topic names are case-sensitive.
/// At most `maximumTopics` topic names may appear.
public struct TopicCondition: Sendable, Equatable, Hashable, CustomStringConvertible {
    public indirect enum Expression: Sendable, Equatable, Hashable {
        case topic(String)
        case not(Expression)
        case and(Expression, Expression)
        case or(Expression, Expression)
    }

    /// FCM's limit on topic names in one condition.
    public static let maximumTopics = 5

    public let source: String
    public let expression: Expression
    /// The distinct topic names, in order of first appearance.
    public let topics: [String]

    public static func parse(_ source: String) throws(TopicConditionError) -> TopicCondition {
        var parser = try ConditionParser(source)
        let expression = try parser.parse()
        var seen = Set<String>()
        let distinct = parser.topicNames.filter { seen.insert($0).inserted }
        return TopicCondition(source: source, expression: expression, topics: distinct)
    }

    public func evaluate(subscribedTopics: Set<String>) -> Bool {
        Self.evaluate(expression, subscribedTopics)
    }

    private static func evaluate(_ expression: Expression, _ topics: Set<String>) -> Bool {
        switch expression {
        case .topic(let name): return topics.contains(name)
        case .not(let inner): return !evaluate(inner, topics)
        case .and(let lhs, let rhs): return evaluate(lhs, topics) && evaluate(rhs, topics)
        case .or(let lhs, let rhs): return evaluate(lhs, topics) || evaluate(rhs, topics)
        }
    }

    public var description: String { source }
}

public struct TopicConditionError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public init(reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// FCM's rules for topic names, whichever API names the topic.
public enum TopicName {
    /// What a topic's name follows in a `to` field: `/topics/news`.
    public static let prefix = "/topics/"

    /// FCM's longest topic name.
    public static let maximumLength = 900

    /// True for a bare topic name (without `/topics/`): `[a-zA-Z0-9-_.~%]{1,900}`.
    public static func isValid<S: StringProtocol>(_ name: S) -> Bool {
        !name.isEmpty && name.utf8.count <= maximumLength && name.utf8.allSatisfy(isTopicNameByte)
    }
}

@inline(__always)
func isTopicNameByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"),
        UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"), UInt8(ascii: "%"):
        return true
    default:
        return false
    }
}

private struct ConditionParser {
    enum Token: Equatable {
        case name(String)
        case word(String)  // lower-cased bare word: "in", "topics", or garbage
        case and, or, not, open, close
    }

    static let maximumNesting = 32

    private var tokens: [Token] = []
    private var position = 0
    private var nesting = 0
    private(set) var topicNames: [String] = []

    init(_ source: String) throws(TopicConditionError) {
        tokens = try Self.tokenize(source)
    }

    static func tokenize(_ source: String) throws(TopicConditionError) -> [Token] {
        let bytes = Array(source.utf8)
        var tokens: [Token] = []
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D:
                i += 1
            case UInt8(ascii: "'"), UInt8(ascii: "\""):
                let quote = byte
                var j = i + 1
                while j < bytes.count, bytes[j] != quote { j += 1 }
                guard j < bytes.count else { throw TopicConditionError(reason: "Unterminated topic name") }
                let name = String(decoding: bytes[(i + 1)..<j], as: UTF8.self)
                guard TopicName.isValid(name) else {
                    throw TopicConditionError(reason: "Invalid topic name '\(name)'")
                }
                tokens.append(.name(name))
                i = j + 1
            case UInt8(ascii: "&"), UInt8(ascii: "|"):
                guard i + 1 < bytes.count, bytes[i + 1] == byte else {
                    throw TopicConditionError(reason: "Expected '\(byte == UInt8(ascii: "&") ? "&&" : "||")'")
                }
                tokens.append(byte == UInt8(ascii: "&") ? .and : .or)
                i += 2
            case UInt8(ascii: "!"): tokens.append(.not); i += 1
            case UInt8(ascii: "("): tokens.append(.open); i += 1
            case UInt8(ascii: ")"): tokens.append(.close); i += 1
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
                var j = i
                while j < bytes.count, isTopicNameByte(bytes[j]) { j += 1 }
                tokens.append(.word(String(decoding: bytes[i..<j], as: UTF8.self).lowercased()))
                i = j
            default:
                var end = i + 1
                while end < bytes.count, bytes[end] & 0xC0 == 0x80 { end += 1 }
                throw TopicConditionError(reason: "Unexpected character '\(String(decoding: bytes[i..<end], as: UTF8.self))'")
            }
        }
        return tokens
    }

    private var current: Token? { position < tokens.count ? tokens[position] : nil }

    mutating func parse() throws(TopicConditionError) -> TopicCondition.Expression {
        guard !tokens.isEmpty else { throw TopicConditionError(reason: "Empty condition") }
        let expression = try parseOr()
        if let token = current { throw TopicConditionError(reason: "Unexpected \(Self.describe(token))") }
        return expression
    }

    private mutating func parseOr() throws(TopicConditionError) -> TopicCondition.Expression {
        var lhs = try parseAnd()
        while current == .or {
            position += 1
            lhs = .or(lhs, try parseAnd())
        }
        return lhs
    }

    private mutating func parseAnd() throws(TopicConditionError) -> TopicCondition.Expression {
        var lhs = try parseUnary()
        while current == .and {
            position += 1
            lhs = .and(lhs, try parseUnary())
        }
        return lhs
    }

    private mutating func parseUnary() throws(TopicConditionError) -> TopicCondition.Expression {
        guard let token = current else { throw TopicConditionError(reason: "Unexpected end of condition") }
        switch token {
        case .not:
            position += 1
            try deeper()
            defer { nesting -= 1 }
            return .not(try parseUnary())
        case .open:
            position += 1
            try deeper()
            defer { nesting -= 1 }
            let inner = try parseOr()
            guard current == .close else {
                throw TopicConditionError(reason: current.map { "Expected ')' but found \(Self.describe($0))" } ?? "Missing ')'")
            }
            position += 1
            return inner
        case .name(let name):
            position += 1
            guard current == .word("in") else { throw TopicConditionError(reason: "Expected 'in topics' after '\(name)'") }
            position += 1
            guard current == .word("topics") else { throw TopicConditionError(reason: "Expected 'in topics' after '\(name)'") }
            position += 1
            topicNames.append(name)
            if topicNames.count > TopicCondition.maximumTopics {
                throw TopicConditionError(reason: "More than \(TopicCondition.maximumTopics) topics in condition")
            }
            return .topic(name)
        default:
            throw TopicConditionError(reason: "Unexpected \(Self.describe(token))")
        }
    }

    private mutating func deeper() throws(TopicConditionError) {
        nesting += 1
        if nesting > Self.maximumNesting { throw TopicConditionError(reason: "Condition nested too deeply") }
    }

    private static func describe(_ token: Token) -> String {
        switch token {
        case .name(let name): return "topic name '\(name)'"
        case .word(let word): return "'\(word)'"
        case .and: return "'&&'"
        case .or: return "'||'"
        case .not: return "'!'"
        case .open: return "'('"
        case .close: return "')'"
        }
    }
}
