import PushDomain

/// The built-in suite for HTTP app servers (`conformance run builtin-http`): one scenario per HTTP
/// obligation of docs/conformance.md ("The HTTP rules"), for the v1 and the legacy API alike. Each
/// `send` step writes one request to the app server's stdin; faults and the virtual clock make FCM
/// misbehave; the audit judges what the app server did about it. Retry-After values are 1-2 s so
/// that a careful app server passes in seconds.
public enum BuiltinHTTPSuite {
    public static let name = "builtin-http"

    public static func scenarios() throws(ScenarioError) -> [Scenario] {
        try BuiltinSuite.parse(json, suite: name)
    }

    /// The suite as JSON, as `conformance show builtin-http` prints it.
    public static let json = #"""
    [
     {"name": "http-round-trip",
      "app_server": "http",
      "description": "A send request on stdin makes the app server send one message to that token, within FCM's limits, and it arrives.",
      "rules": ["message-limits", "no-retry-invalid"],
      "devices": ["a"],
      "steps": [
        {"send": {"to": "a", "data": {"hello": "1"}}},
        {"expect_downstream": {"device": "a", "within_ms": 15000}}
      ]},
     {"name": "http-retry-unavailable",
      "app_server": "http",
      "description": "The first two attempts are answered 503 (v1: UNAVAILABLE) without Retry-After: the app server retries with exponential backoff from 1 s (1 s, then 2 s) and delivers.",
      "rules": ["retry-backoff"],
      "devices": ["a"],
      "steps": [
        {"fault": {"action": "http_error", "status": 503, "token": "$a", "times": 2}},
        {"send": {"to": "a", "data": {"n": "1"}}},
        {"expect_downstream": {"device": "a", "within_ms": 20000}}
      ]},
     {"name": "http-retry-internal",
      "app_server": "http",
      "description": "The first attempt is answered 500 (v1: INTERNAL): the app server retries after at least 1 s and delivers.",
      "rules": ["retry-backoff"],
      "devices": ["a"],
      "steps": [
        {"fault": {"action": "http_error", "status": 500, "token": "$a", "times": 1}},
        {"send": {"to": "a", "data": {"n": "1"}}},
        {"expect_downstream": {"device": "a", "within_ms": 20000}}
      ]},
     {"name": "http-retry-after-unavailable",
      "app_server": "http",
      "description": "The first attempt is answered 503 with Retry-After: 2: the app server waits at least that long before it retries.",
      "rules": ["retry-backoff"],
      "devices": ["a"],
      "steps": [
        {"fault": {"action": "http_error", "status": 503, "retry_after": 2, "token": "$a", "times": 1}},
        {"send": {"to": "a", "data": {"n": "1"}}},
        {"expect_downstream": {"device": "a", "within_ms": 20000}}
      ]},
     {"name": "http-retry-after-quota",
      "app_server": "http",
      "description": "The first attempt is answered 429 (v1: QUOTA_EXCEEDED) with Retry-After: 2: the app server waits at least that long before it retries.",
      "rules": ["retry-backoff"],
      "devices": ["a"],
      "steps": [
        {"fault": {"action": "http_error", "status": 429, "retry_after": 2, "token": "$a", "times": 1}},
        {"send": {"to": "a", "data": {"n": "1"}}},
        {"expect_downstream": {"device": "a", "within_ms": 20000}}
      ]},
     {"name": "http-no-retry-invalid",
      "app_server": "http",
      "description": "The first request is answered 400 (v1: INVALID_ARGUMENT): the app server does not send it again unchanged; the next request is delivered.",
      "rules": ["no-retry-invalid"],
      "devices": ["a"],
      "steps": [
        {"fault": {"action": "http_error", "status": 400, "token": "$a", "times": 1}},
        {"send": {"to": "a", "data": {"n": "refused"}}},
        {"send": {"to": "a", "data": {"n": "next"}}},
        {"expect_downstream": {"device": "a", "within_ms": 15000}}
      ]},
     {"name": "http-drop-unregistered",
      "app_server": "http",
      "description": "Device b is uninstalled: after FCM answers UNREGISTERED (v1) or NotRegistered (legacy) for its token, the app server never sends to it again.",
      "rules": ["drop-unregistered"],
      "devices": ["a", "b"],
      "steps": [
        {"device": {"name": "b", "go": "uninstall"}},
        {"send": {"to": "b", "data": {"n": "1"}}},
        {"send": {"to": "a", "data": {"n": "2"}}},
        {"expect_downstream": {"device": "a", "within_ms": 15000}},
        {"send": {"to": "b", "data": {"n": "3"}}},
        {"send": {"to": "a", "data": {"n": "4"}}},
        {"expect_downstream": {"device": "a"}}
      ]},
     {"name": "http-use-canonical-id",
      "app_server": "http",
      "description": "Device a's token is refreshed: after a legacy result names the canonical registration_id, the app server sends to that token instead of the old one (v1 names none, so a v1 app server keeps this trivially).",
      "rules": ["use-canonical-id"],
      "devices": ["a"],
      "steps": [
        {"device": {"name": "a", "go": "refresh_token"}},
        {"send": {"to": "a", "data": {"n": "1"}}},
        {"expect_downstream": {"device": "a", "within_ms": 15000}},
        {"send": {"to": "a", "data": {"n": "2"}}},
        {"expect_downstream": {"device": "a"}}
      ]},
     {"name": "http-reuse-access-token",
      "app_server": "http",
      "description": "Three sends: a v1 app server fetches one OAuth2 access token and uses it for all of them (a legacy one fetches none).",
      "rules": ["reuse-access-token"],
      "devices": ["a"],
      "steps": [
        {"send": {"to": "a", "data": {"n": "1"}}},
        {"send": {"to": "a", "data": {"n": "2"}}},
        {"send": {"to": "a", "data": {"n": "3"}}},
        {"expect_downstream": {"device": "a", "count": 3, "within_ms": 15000}}
      ]},
     {"name": "http-refresh-access-token",
      "app_server": "http",
      "description": "The emulator's clock moves an hour on, past the access token's expiry: answered 401, the app server fetches a new token and delivers.",
      "rules": ["refresh-access-token", "reuse-access-token"],
      "clock": "virtual",
      "devices": ["a"],
      "steps": [
        {"send": {"to": "a", "data": {"n": "1"}}},
        {"expect_downstream": {"device": "a", "within_ms": 15000}},
        {"advance_clock": {"ms": 3600000}},
        {"send": {"to": "a", "data": {"n": "2"}}},
        {"expect_downstream": {"device": "a"}}
      ]},
     {"name": "http-message-limits",
      "app_server": "http",
      "description": "Two requests break FCM's limits (a 5000-byte payload, the reserved data key \"from\"): the app server refuses them itself and sends only the third.",
      "rules": ["message-limits"],
      "devices": ["a"],
      "steps": [
        {"send": {"to": "a", "data": {"n": "big"}, "pad_bytes": 5000}},
        {"send": {"to": "a", "data": {"from": "me"}}},
        {"send": {"to": "a", "data": {"n": "fits"}}},
        {"expect_downstream": {"device": "a", "within_ms": 15000}}
      ]}
    ]
    """#
}
