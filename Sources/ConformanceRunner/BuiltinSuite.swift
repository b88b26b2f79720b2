import PushDomain

/// The built-in suite: one scenario per client obligation of docs/conformance.md, runnable with no
/// files (`conformance run builtin`). `conformance show builtin` prints it as a starting point for
/// a team's own scenarios.
public enum BuiltinSuite {
    public static let name = "builtin"

    public static func scenarios() throws(ScenarioError) -> [Scenario] {
        try parse(json, suite: name)
    }

    /// A built-in suite's scenarios from its JSON (this one's, or `BuiltinHTTPSuite`'s).
    static func parse(_ text: String, suite: String) throws(ScenarioError) -> [Scenario] {
        let parsed: JSONValue
        do { parsed = try JSONValue.parse(text) } catch { throw ScenarioError(path: suite, reason: "\(error)") }
        var out: [Scenario] = []
        for (i, s) in (parsed.arrayValue ?? []).enumerated() {
            out.append(try Scenario(json: s, source: "\(suite)[\(i)]"))
        }
        return out
    }

    /// The suite as JSON (an array of scenarios), as `conformance show builtin` prints it.
    public static let json = #"""
    [
     {"name": "round-trip",
      "description": "Upstream from a device with send_to makes the app server send one downstream message to that token (the test-mode contract); its stanzas are well formed.",
      "rules": ["well-formed"],
      "devices": ["a"],
      "steps": [
        {"upstream": {"from": "a", "data": {"send_to": "$a"}}},
        {"expect_downstream": {"device": "a", "within_ms": 10000}}
      ]},
     {"name": "ack-upstream",
      "description": "Every upstream message (and every delivery receipt the app server asked for) is ACKed, on the connection that delivered it (CCS §4, §5 in docs/sources.md).",
      "rules": ["ack-upstream", "ack-receipts"],
      "devices": ["a"],
      "steps": [
        {"upstream": {"from": "a", "data": {"hello": "1"}}},
        {"upstream": {"from": "a", "data": {"hello": "2"}}},
        {"upstream": {"from": "a", "data": {"send_to": "$a"}}},
        {"expect_downstream": {"device": "a"}},
        {"expect_acked": {"within_ms": 10000}}
      ]},
     {"name": "pending-limit",
      "description": "With ACKs slowed down, the app server never has more than 100 downstream messages unanswered on a connection (CCS §4 in docs/sources.md).",
      "rules": ["pending-limit"],
      "devices": ["a"],
      "steps": [
        {"fault": {"action": "delay_ack", "delay_ms": 1500}},
        {"upstream": {"from": "a", "data": {"send_to": "$a", "n": "burst"}, "repeat": 150}},
        {"expect_downstream": {"device": "a", "count": 150, "within_ms": 30000}}
      ]},
     {"name": "draining",
      "description": "After CONNECTION_DRAINING the app server opens a new connection and sends nothing new on the drained one (CCS §1.7 in docs/sources.md).",
      "rules": ["drain-reconnect", "drain-no-send"],
      "devices": ["a"],
      "steps": [
        {"drain": {}},
        {"expect_new_connection": {"within_ms": 5000}},
        {"upstream": {"from": "a", "data": {"send_to": "$a"}}},
        {"expect_downstream": {"device": "a", "within_ms": 10000}}
      ]},
     {"name": "retry-service-unavailable",
      "description": "A message NACKed SERVICE_UNAVAILABLE is retried with exponential backoff from 1 s (CCS §3.3 in docs/sources.md).",
      "rules": ["retry-backoff"],
      "devices": ["a"],
      "steps": [
        {"fault": {"action": "nack", "code": "SERVICE_UNAVAILABLE", "times": 2}},
        {"upstream": {"from": "a", "data": {"send_to": "$a"}}},
        {"expect_downstream": {"device": "a", "within_ms": 30000}}
      ]},
     {"name": "retry-internal-server-error",
      "description": "A message NACKed INTERNAL_SERVER_ERROR is retried with backoff, not at once (CCS §3.3 in docs/sources.md).",
      "rules": ["retry-backoff"],
      "devices": ["a"],
      "steps": [
        {"fault": {"action": "nack", "code": "INTERNAL_SERVER_ERROR", "times": 1}},
        {"upstream": {"from": "a", "data": {"send_to": "$a"}}},
        {"expect_downstream": {"device": "a", "within_ms": 30000}}
      ]},
     {"name": "no-resend-acked",
      "description": "Two requests for the same token are two messages: a message id that was ACKed is never sent again (CCS §3.1, §4 in docs/sources.md).",
      "rules": ["no-resend-acked"],
      "devices": ["a"],
      "steps": [
        {"upstream": {"from": "a", "data": {"send_to": "$a"}}},
        {"expect_downstream": {"device": "a"}},
        {"expect_acked": {"within_ms": 10000}},
        {"upstream": {"from": "a", "data": {"send_to": "$a"}}},
        {"expect_downstream": {"device": "a"}}
      ]},
     {"name": "drop-unregistered",
      "description": "After DEVICE_UNREGISTERED for a token, the app server never sends to it again (CCS §3.3 in docs/sources.md).",
      "rules": ["drop-unregistered"],
      "devices": ["a", "b"],
      "steps": [
        {"device": {"name": "b", "go": "uninstall"}},
        {"upstream": {"from": "a", "data": {"send_to": "$b"}}},
        {"upstream": {"from": "a", "data": {"send_to": "$a"}}},
        {"expect_downstream": {"device": "a"}},
        {"upstream": {"from": "a", "data": {"send_to": "$b"}}},
        {"upstream": {"from": "a", "data": {"send_to": "$a"}}},
        {"expect_downstream": {"device": "a"}}
      ]},
     {"name": "use-canonical-id",
      "description": "After an ACK names a canonical registration id, the app server sends to that token instead of the old one (CCS §3.1 in docs/sources.md).",
      "rules": ["use-canonical-id"],
      "devices": ["a", "b"],
      "steps": [
        {"device": {"name": "a", "go": "refresh_token"}},
        {"upstream": {"from": "b", "data": {"send_to": "$a"}}},
        {"expect_downstream": {"device": "a"}},
        {"expect_acked": {"within_ms": 10000}},
        {"upstream": {"from": "b", "data": {"send_to": "$a"}}},
        {"expect_downstream": {"device": "a"}}
      ]},
     {"name": "connection-lost",
      "description": "When the connection closes with a message unanswered, the app server reconnects and sends it again (CCS §1.7, §4 in docs/sources.md).",
      "rules": ["no-resend-acked"],
      "devices": ["a"],
      "steps": [
        {"fault": {"action": "close_connection", "times": 1}},
        {"upstream": {"from": "a", "data": {"send_to": "$a"}}},
        {"expect_new_connection": {"within_ms": 10000}},
        {"expect_downstream": {"device": "a", "within_ms": 15000}}
      ]}
    ]
    """#
}
