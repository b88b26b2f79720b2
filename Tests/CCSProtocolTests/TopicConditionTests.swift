import Testing
@testable import CCSProtocol
@testable import PushDomain

@Suite("Topic conditions")
struct TopicConditionTests {
    @Test func documentationExample() throws {
        let condition = try TopicCondition.parse("'TopicA' in topics && ('TopicB' in topics || 'TopicC' in topics)")
        #expect(condition.topics == ["TopicA", "TopicB", "TopicC"])
        #expect(condition.expression == .and(.topic("TopicA"), .or(.topic("TopicB"), .topic("TopicC"))))
        #expect(condition.evaluate(subscribedTopics: ["TopicA", "TopicB"]))
        #expect(condition.evaluate(subscribedTopics: ["TopicA", "TopicC"]))
        #expect(!condition.evaluate(subscribedTopics: ["TopicA"]))
        #expect(!condition.evaluate(subscribedTopics: ["TopicB", "TopicC"]))
        #expect(!condition.evaluate(subscribedTopics: []))
    }

    @Test func andBindsTighterThanOr() throws {
        let condition = try TopicCondition.parse("'a' in topics || 'b' in topics && 'c' in topics")
        #expect(condition.expression == .or(.topic("a"), .and(.topic("b"), .topic("c"))))
        #expect(condition.evaluate(subscribedTopics: ["a"]))
        #expect(!condition.evaluate(subscribedTopics: ["b"]))
        #expect(condition.evaluate(subscribedTopics: ["b", "c"]))
    }

    @Test func operatorsAreLeftAssociative() throws {
        let condition = try TopicCondition.parse("'a' in topics && 'b' in topics && 'c' in topics")
        #expect(condition.expression == .and(.and(.topic("a"), .topic("b")), .topic("c")))
    }

    @Test func negation() throws {
        let condition = try TopicCondition.parse("!('a' in topics) && !!'b' in topics")
        #expect(condition.expression == .and(.not(.topic("a")), .not(.not(.topic("b")))))
        #expect(condition.evaluate(subscribedTopics: ["b"]))
        #expect(!condition.evaluate(subscribedTopics: ["a", "b"]))
        #expect(!condition.evaluate(subscribedTopics: []))
    }

    @Test func quotesKeywordsAndSpacing() throws {
        let condition = try TopicCondition.parse(#"  "a-b_c.d~e%f" IN Topics||('x'in topics)  "#)
        #expect(condition.topics == ["a-b_c.d~e%f", "x"])
        #expect(condition.evaluate(subscribedTopics: ["x"]))
    }

    @Test func topicNamesAreCaseSensitive() throws {
        let condition = try TopicCondition.parse("'News' in topics")
        #expect(!condition.evaluate(subscribedTopics: ["news"]))
        #expect(condition.evaluate(subscribedTopics: ["News"]))
    }

    @Test func fiveTopicsAllowedSixRejected() throws {
        let five = "'a' in topics || 'b' in topics || 'c' in topics || 'd' in topics || 'e' in topics"
        #expect(try TopicCondition.parse(five).topics.count == 5)
        #expect(throws: TopicConditionError(reason: "More than 5 topics in condition")) {
            try TopicCondition.parse(five + " || 'f' in topics")
        }
        // Repeating a name still counts.
        #expect(throws: TopicConditionError(reason: "More than 5 topics in condition")) {
            try TopicCondition.parse(Array(repeating: "'a' in topics", count: 6).joined(separator: " && "))
        }
    }

    @Test(arguments: [
        ("", "Empty condition"),
        ("   ", "Empty condition"),
        ("'a'", "Expected 'in topics' after 'a'"),
        ("'a' in", "Expected 'in topics' after 'a'"),
        ("'a' in topic", "Expected 'in topics' after 'a'"),
        ("'a' in topics &&", "Unexpected end of condition"),
        ("'a' in topics & 'b' in topics", "Expected '&&'"),
        ("'a' in topics | 'b' in topics", "Expected '||'"),
        ("('a' in topics", "Missing ')'"),
        ("'a' in topics)", "Unexpected ')'"),
        ("('a' in topics 'b' in topics)", "Expected ')' but found topic name 'b'"),
        ("'a' in topics 'b' in topics", "Unexpected topic name 'b'"),
        ("a in topics", "Unexpected 'a'"),
        ("'a b' in topics", "Invalid topic name 'a b'"),
        ("'' in topics", "Invalid topic name ''"),
        ("'/topics/a' in topics", "Invalid topic name '/topics/a'"),
        ("'a in topics", "Unterminated topic name"),
        ("'a' in topics && ()", "Unexpected ')'"),
        ("'a' in topics == 'b'", "Unexpected character '='"),
        ("'a' in topics ∧ 'b' in topics", "Unexpected character '∧'"),
    ])
    func syntaxErrors(source: String, reason: String) {
        #expect(throws: TopicConditionError(reason: reason)) { try TopicCondition.parse(source) }
    }

    @Test func nestingIsBounded() throws {
        let ok = String(repeating: "(", count: 32) + "'a' in topics" + String(repeating: ")", count: 32)
        #expect(try TopicCondition.parse(ok).evaluate(subscribedTopics: ["a"]))
        let deep = String(repeating: "(", count: 10_000) + "'a' in topics" + String(repeating: ")", count: 10_000)
        #expect(throws: TopicConditionError(reason: "Condition nested too deeply")) { try TopicCondition.parse(deep) }
        let nots = String(repeating: "!", count: 10_000) + "'a' in topics"
        #expect(throws: TopicConditionError(reason: "Condition nested too deeply")) { try TopicCondition.parse(nots) }
    }

    @Test func topicNameValidation() {
        #expect(DownstreamTarget.isValidTopicName("foo-bar_1.~%"))
        #expect(!DownstreamTarget.isValidTopicName(""))
        #expect(!DownstreamTarget.isValidTopicName("a/b"))
        #expect(!DownstreamTarget.isValidTopicName("é"))
    }
}

