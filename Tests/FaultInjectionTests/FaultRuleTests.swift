import PushDomain
import FaultInjection
import Testing

@Suite struct FaultRuleTests {
    func rule(_ text: String) throws -> FaultRule {
        try FaultRule(json: try JSONValue.parse(text), defaultID: "f1")
    }

    @Test func parsesEveryActionAndWritesItBack() throws {
        let texts = [
            #"{"action":"nack","code":"SERVICE_UNAVAILABLE","sender":"123","message_id":"m-*"}"#,
            #"{"action":"delay_ack","delay_ms":250}"#,
            #"{"action":"drop_ack","times":1}"#,
            #"{"action":"close_connection","after":5,"times":1}"#,
            #"{"action":"drain","after":2}"#,
            #"{"action":"http_error","status":503,"retry_after":10,"topic":"/topics/news"}"#,
            #"{"action":"apns_error","apns_status":8}"#,
            #"{"action":"apns_error","apns_reason":"TooManyRequests","token":"ab"}"#,
            #"{"action":"lose_device_ack","token":"t1"}"#,
            #"{"action":"delay_device_ack","delay_ms":0}"#,
            #"{"action":"uninstall","probability":0.5,"seed":42}"#,
        ]
        for text in texts {
            let parsed = try rule(text)
            let again = try FaultRule(json: parsed.json, defaultID: "other")
            #expect(again == parsed, "\(text)")
        }
        #expect(try rule(texts[5]).scope.topic == "news")
        #expect(try rule(texts[7]).action == .apnsError(status: 10, reason: "TooManyRequests"))
    }

    @Test(arguments: [
        (#"{"code":"SERVICE_UNAVAILABLE"}"#, "action"),
        (#"{"action":"explode"}"#, "action"),
        (#"{"action":"nack"}"#, "code"),
        (#"{"action":"nack","code":"NOPE"}"#, "code"),
        (#"{"action":"delay_ack","delay_ms":-1}"#, "delay_ms"),
        (#"{"action":"delay_ack","delay_ms":1e12}"#, "delay_ms"),
        (#"{"action":"http_error","status":200}"#, "status"),
        (#"{"action":"http_error","retry_after":"soon"}"#, "retry_after"),
        (#"{"action":"apns_error","apns_status":256}"#, "apns_status"),
        (#"{"action":"apns_error","apns_reason":"Too many"}"#, "apns_reason"),
        (#"{"action":"apns_error","apns_reason":""}"#, "apns_reason"),
        (#"{"action":"drop_ack","probability":0}"#, "probability"),
        (#"{"action":"drop_ack","probability":1.5}"#, "probability"),
        (#"{"action":"drop_ack","times":0}"#, "times"),
        (#"{"action":"drop_ack","after":-3}"#, "after"),
        (#"{"action":"drop_ack","id":"a b"}"#, "id"),
        (#"{"action":"drop_ack","colour":"red"}"#, "colour"),
        (#"["drop_ack"]"#, "rule"),
    ])
    func refusesBadRules(text: String, field: String) throws {
        #expect(throws: FaultRuleError.self) { try rule(text) }
        do { _ = try rule(text) } catch let error as FaultRuleError { #expect(error.field == field) }
    }

    @Test func afterTimesAndScope() throws {
        var plan = FaultPlan(rules: [try rule(#"{"id":"c","action":"close_connection","sender":"1","after":2,"times":1}"#)])
        let mine = FaultSubject(sender: "1", origin: "test")
        let other = FaultSubject(sender: "2", origin: "test")
        #expect(plan.decide(.ccsDownstream, other).isEmpty)
        #expect(plan.decide(.ccsDownstream, mine).isEmpty)
        #expect(plan.decide(.ccsDownstream, mine).isEmpty)
        #expect(plan.decide(.ccsDownstream, mine).map(\.id) == ["c"])
        #expect(plan.decide(.ccsDownstream, mine).isEmpty, "times: 1")
        #expect(plan.decide(.httpSend, mine).isEmpty, "another point")
    }

    @Test func messageIDPatterns() throws {
        var plan = FaultPlan(rules: [try rule(#"{"action":"drop_ack","message_id":"m-*-x"}"#)])
        func fires(_ id: String) -> Bool { !plan.decide(.ccsDownstream, FaultSubject(messageID: id, origin: "t")).isEmpty }
        #expect(fires("m-1-x"))
        #expect(fires("m--x"))
        #expect(fires("m-a-b-x"))
        #expect(!fires("m-1-y"))
        #expect(!fires("n-1-x"))
        #expect(!plan.decide(.ccsDownstream, FaultSubject(origin: "no id")).isEmpty == false)
    }

    @Test func theSameSeedGivesTheSameFaults() throws {
        let r = try rule(#"{"action":"drop_ack","probability":0.3,"seed":7}"#)
        func run() -> [Bool] {
            var plan = FaultPlan(rules: [r])
            return (0..<200).map { _ in !plan.decide(.ccsDownstream, FaultSubject(origin: "t")).isEmpty }
        }
        let a = run(), b = run()
        #expect(a == b)
        let fired = a.filter { $0 }.count
        #expect(fired > 30 && fired < 90, "about 30 % of 200: \(fired)")
        var other = FaultPlan(rules: [try rule(#"{"action":"drop_ack","probability":0.3,"seed":8}"#)])
        let c = (0..<200).map { _ in !other.decide(.ccsDownstream, FaultSubject(origin: "t")).isEmpty }
        #expect(c != a)
    }

    @Test func injectorLogsAndSkipsInactivePoints() throws {
        let injector = FaultInjector(rules: [], logCapacity: 3, now: { 42 })
        #expect(!injector.isActive(.ccsDownstream))
        injector.put(try rule(#"{"id":"n","action":"nack","code":"INTERNAL_SERVER_ERROR"}"#))
        #expect(injector.isActive(.ccsDownstream))
        #expect(!injector.isActive(.httpSend))
        for i in 0..<5 {
            #expect(injector.decide(.ccsDownstream, FaultSubject(sender: "9", messageID: "m\(i)", origin: "ccs:c1"))
                == [.nack(.internalServerError, description: nil)])
        }
        #expect(injector.log.map(\.subject.messageID) == ["m2", "m3", "m4"], "bounded, oldest first")
        #expect(injector.log.first?.at == 42)
        #expect(injector.remove(id: "n") != nil)
        #expect(!injector.isActive(.ccsDownstream))
        #expect(injector.remove(id: "n") == nil)
    }

    @Test func storedRulesRoundTrip() throws {
        let rules = [try rule(#"{"id":"a","action":"uninstall","token":"t"}"#),
                     try rule(#"{"id":"b","action":"http_error","status":429,"retry_after":3}"#)]
        #expect(try FaultInjector.decode(FaultInjector.encode(rules)) == rules)
    }
}
