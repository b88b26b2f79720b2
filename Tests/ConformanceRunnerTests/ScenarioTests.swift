import AppServerAudit
import ConformanceRunner
import PushDomain
import Testing

@Suite struct ScenarioTests {
    func scenario(_ text: String) throws -> Scenario {
        try Scenario(json: try JSONValue.parse(text), source: "test")
    }

    @Test func theBuiltinSuiteCoversEveryRule() throws {
        let suite = try BuiltinSuite.scenarios()
        #expect(suite.count >= 9)
        #expect(Set(suite.map(\.name)).count == suite.count, "names are unique")
        // Between them, the CCS suite and the HTTP suite judge every rule.
        let http = try BuiltinHTTPSuite.scenarios()
        let judged = Set((suite + http).flatMap(\.rules))
        #expect(judged == Set(AuditRule.allCases), "missing: \(Set(AuditRule.allCases).subtracting(judged))")
        #expect(suite.allSatisfy { $0.appServer == .ccs })
    }

    @Test func theHTTPSuiteIsForHTTPAppServers() throws {
        let suite = try BuiltinHTTPSuite.scenarios()
        #expect(suite.count >= 10 && Set(suite.map(\.name)).count == suite.count)
        #expect(suite.allSatisfy { $0.appServer == .http && $0.name.hasPrefix("http-") })
        let http: Set<AuditRule> = [.retryBackoff, .noRetryInvalid, .dropUnregistered, .useCanonicalID, .reuseAccessToken,
                                    .refreshAccessToken, .messageLimits]
        #expect(Set(suite.flatMap(\.rules)) == http)
        // Every HTTP-only rule cites a public page.
        for rule in [AuditRule.noRetryInvalid, .reuseAccessToken, .refreshAccessToken, .messageLimits] {
            #expect(rule.source.hasPrefix("https://"), "\(rule)")
        }
    }

    @Test func parsesSendSteps() throws {
        let s = try scenario("""
            {"name":"h","app_server":"http","devices":["a"],"steps":[
              {"send":{"to":"a","data":{"k":"v"},"id":"x1","pad_bytes":10}},
              {"send":{"to":"a"}}
            ]}
            """)
        #expect(s.appServer == .http)
        #expect(s.steps == [.send(to: "a", data: ["k": "v"], id: "x1", padBytes: 10), .send(to: "a", data: [:], id: nil, padBytes: 0)])
    }

    @Test func parsesEveryStepKind() throws {
        let s = try scenario("""
            {"name":"all","clock":"virtual","rules":["ack-upstream"],"devices":["a","b"],"steps":[
              {"upstream":{"from":"a","data":{"send_to":"$b"},"message_id":"u","repeat":3}},
              {"expect_downstream":{"device":"b","count":2,"within_ms":500}},
              {"expect_acked":{}},
              {"fault":{"action":"drop_ack"}},
              {"device":{"name":"b","go":"uninstall"}},
              {"drain":{}},
              {"expect_new_connection":{"within_ms":1}},
              {"advance_clock":{"ms":3600000}},
              {"wait":{"ms":5}},
              {"expect_audit":{"clean":["well-formed"],"broken":["drain-reconnect"]}}
            ]}
            """)
        #expect(s.clock == .virtual && s.devices == ["a", "b"] && s.rules == [.ackUpstream])
        #expect(s.steps == [
            .upstream(from: "a", data: ["send_to": "$b"], messageID: "u", repeat: 3),
            .expectDownstream(device: "b", count: 2, withinMillis: 500),
            .expectAcked(withinMillis: 10_000),
            .fault(.object(["action": .string("drop_ack")])),
            .device("b", .uninstall),
            .drain,
            .expectNewConnection(withinMillis: 1),
            .advanceClock(millis: 3_600_000),
            .wait(millis: 5),
            .expectAudit(clean: [.wellFormed], broken: [.drainReconnect]),
        ])
    }

    @Test(arguments: [
        (#"{"steps":[]}"#, "name"),
        (#"{"name":"x"}"#, "steps"),
        (#"{"name":"x","rules":["nope"],"steps":[]}"#, "rules[0]"),
        (#"{"name":"x","clock":"sundial","steps":[]}"#, "clock"),
        (#"{"name":"x","devices":["a","a"],"steps":[]}"#, "devices[1]"),
        (#"{"name":"x","devices":["a b"],"steps":[]}"#, "devices[0]"),
        (#"{"name":"x","steps":[{"teleport":{}}]}"#, "steps[0]"),
        (#"{"name":"x","steps":[{"drain":{},"wait":{"ms":1}}]}"#, "steps[0]"),
        (#"{"name":"x","devices":["a"],"steps":[{"upstream":{"from":"z"}}]}"#, "steps[0].upstream.from"),
        (#"{"name":"x","devices":["a"],"steps":[{"upstream":{"from":"a","data":{"n":1}}}]}"#, "steps[0].upstream.data.n"),
        (#"{"name":"x","devices":["a"],"steps":[{"upstream":{"from":"a","repeat":0}}]}"#, "steps[0].upstream.repeat"),
        (#"{"name":"x","devices":["a"],"steps":[{"expect_downstream":{"device":"a","within_ms":-1}}]}"#, "within_ms"),
        (#"{"name":"x","steps":[{"advance_clock":{"ms":-5}}]}"#, "steps[0].advance_clock.ms"),
        (#"{"name":"x","steps":[{"expect_audit":{"clean":["x"]}}]}"#, "clean[0]"),
        (#"{"name":"x","app_server":"smtp","steps":[]}"#, "app_server"),
        (#"{"name":"x","devices":["a"],"steps":[{"send":{"to":"a"}}]}"#, "steps[0].send"),
        (#"{"name":"x","app_server":"http","devices":["a"],"steps":[{"send":{"to":"z"}}]}"#, "steps[0].send.to"),
        (#"{"name":"x","app_server":"http","devices":["a"],"steps":[{"send":{"to":"a","pad_bytes":70000}}]}"#, "pad_bytes"),
        (#"{"name":"x","app_server":"http","devices":["a"],"steps":[{"send":{"to":"a","id":"a b"}}]}"#, "steps[0].send.id"),
    ])
    func refusesBadScenarios(text: String, path: String) throws {
        do {
            _ = try scenario(text)
            Issue.record("accepted \(text)")
        } catch let error as ScenarioError {
            #expect(error.path.contains(path), "\(error)")
        }
    }
}

@Suite struct JUnitReportTests {
    @Test func escapesAndCountsFailures() throws {
        let scenarios = try BuiltinSuite.scenarios()
        let finding = AuditFinding(rule: .ackUpstream, sender: "1", connection: "c<1>", at: 5, text: "u & \"x\" not ACKed",
                                   evidence: [AuditEvidence(at: 1, what: "sent", messageID: "m'1")])
        let results = [
            ScenarioResult(suite: "builtin", scenario: scenarios[0], passed: true, failure: nil, seconds: 1.5,
                           findings: [], appServerLog: "log \u{1} with a control byte"),
            ScenarioResult(suite: "builtin", scenario: scenarios[1], passed: false, failure: "step 2 <expect_acked>: late",
                           seconds: 0.25, findings: [finding], appServerLog: ""),
        ]
        let xml = JUnitReport.xml(results)
        #expect(xml.contains(#"<testsuites name="ccs-emulator conformance" tests="2" failures="1""#))
        #expect(xml.contains(#"<testcase classname="conformance.builtin" name="round-trip" time="1.500">"#))
        #expect(xml.contains(#"<failure message="step 2 &lt;expect_acked&gt;: late" type="conformance">"#))
        #expect(xml.contains("u &amp; &quot;x&quot; not ACKed"))
        #expect(xml.contains("message_id=m&apos;1"))
        #expect(!xml.contains("\u{1}"), "control bytes cannot be in XML 1.0")
    }
}
