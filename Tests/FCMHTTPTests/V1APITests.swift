import CCSEngine
import CCSProtocol
import PushDomain
import FCMHTTP
import Foundation
import GoogleAuth
import Hummingbird
import HummingbirdTesting
import Testing

/// OAuth2 and `messages:send` through Hummingbird's router test client.
@Suite struct V1APITests {
    static func bearer(_ token: String) -> HTTPFields {
        [.contentType: "application/json", .authorization: "Bearer \(token)"]
    }

    static func fcmErrorCode(_ body: JSONValue) -> String? {
        body["error"]?["details"]?.arrayValue?.first { $0["@type"] == "type.googleapis.com/google.firebase.fcm.v1.FcmError" }?["errorCode"]?.stringValue
    }

    @Test func aServiceAccountGetsATokenAndSends() async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            let access = try await f.accessToken(client: client)
            #expect(access.hasPrefix("ya29."))
            let body = #"""
            {"message":{"token":"\#(token)","data":{"k":"v"},"notification":{"title":"Hi","body":"there"},
             "android":{"collapse_key":"c1","priority":"high","ttl":"3.5s","notification":{"channel_id":"ch","color":"#ff0000"}},
             "apns":{"headers":{"apns-priority":"10"},"payload":{"aps":{"badge":1}}},
             "webpush":{"headers":{"TTL":"60"}},"fcm_options":{"analytics_label":"l1"}}}
            """#
            let response = try await post(client, "/v1/projects/123456789/messages:send", body, headers: Self.bearer(access))
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let name = try #require(try json(response)["name"]?.stringValue)
            #expect(name.hasPrefix("projects/123456789/messages/0:"))
            let queued = try #require(try f.queue(token).first)
            #expect("projects/123456789/messages/" + queued.deviceMessageID == name)
            #expect(queued.timeToLive == 4)
            #expect(queued.priority == "high")
            #expect(queued.collapseKey == "c1")
            #expect(queued.isNotification)
            let blocks = try JSONValue.parse(try #require(queued.platformBlocks))
            #expect(blocks["apns"]?["headers"]?["apns-priority"] == "10")
            #expect(blocks["webpush"]?["headers"]?["TTL"] == "60")
            #expect(blocks["android"]?["notification"]?["channel_id"] == "ch")
        }
    }

    @Test func credentialsComeFromTheRunningServer() async throws {
        let f = try Fixture()
        try await f.test { client in
            let response = try await post(client, "/emulator/v1/credentials", #"{"project_id":"demo-project"}"#)
            #expect(response.status == .ok)
            let file = try json(response)
            #expect(file["type"] == "service_account")
            #expect(file["project_id"] == "demo-project")
            #expect(file["token_uri"]?.stringValue?.hasSuffix("/token") == true)
            #expect(file["private_key"]?.stringValue?.hasPrefix("-----BEGIN PRIVATE KEY-----") == true)
            let id = try #require(file["private_key_id"]?.stringValue)
            #expect(f.api.keys.key(id: id)?.projectID == "demo-project")

            let bad = try await post(client, "/emulator/v1/credentials", #"{"project_id":"Bad Project!"}"#)
            #expect(bad.status == .badRequest)
        }
    }

    @Test func missingForgedAndExpiredTokensAre401InGooglesShape() async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            let body = #"{"message":{"token":"\#(token)"}}"#
            let none = try await post(client, "/v1/projects/123456789/messages:send", body)
            #expect(none.status == .unauthorized)
            #expect(try json(none)["error"]?["status"] == "UNAUTHENTICATED")
            #expect(none.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true)

            let access = try await f.accessToken(client: client)
            var forged = access
            forged.removeLast()
            forged.append(access.last == "A" ? "B" : "A")
            for bad in [forged, "ya29.nonsense", "x", String(repeating: "y", count: 5000)] {
                let response = try await post(client, "/v1/projects/123456789/messages:send", body, headers: Self.bearer(bad))
                #expect(response.status == .unauthorized)
                #expect(try json(response)["error"]?["code"] == .int(401))
            }
            let good = try await post(client, "/v1/projects/123456789/messages:send", body, headers: Self.bearer(access))
            #expect(good.status == .ok)
            // The token lives 3599 s on the engine's clock, virtual time included.
            _ = f.clock.advance(byMillis: 3_599_000)
            let expired = try await post(client, "/v1/projects/123456789/messages:send", body, headers: Self.bearer(access))
            #expect(expired.status == .unauthorized)
            #expect(String(buffer: expired.body).contains("invalid authentication credentials"))
        }
    }

    @Test func refusalsCarryTheFcmErrorCode() async throws {
        let f = try Fixture()
        let mine = try await f.register(senders: ["123456789"])
        let theirs = try await f.register(senders: ["42"])
        let gone = try await f.register(senders: ["123456789"])
        try await f.engine.uninstall(token: gone)
        try await f.test { client in
            let access = try await f.accessToken(client: client)
            func send(_ token: String, extra: String = "") async throws -> TestResponse {
                try await post(client, "/v1/projects/123456789/messages:send", #"{"message":{"token":"\#(token)"\#(extra)}}"#,
                               headers: Self.bearer(access))
            }
            let unregistered = try await send(gone)
            #expect(unregistered.status == .notFound)
            #expect(Self.fcmErrorCode(try json(unregistered)) == "UNREGISTERED")
            let mismatch = try await send(theirs)
            #expect(mismatch.status == .forbidden)
            #expect(Self.fcmErrorCode(try json(mismatch)) == "SENDER_ID_MISMATCH")
            let invalid = try await send("not-a-token")
            #expect(invalid.status == .badRequest)
            #expect(Self.fcmErrorCode(try json(invalid)) == "INVALID_ARGUMENT")
            let package = try await send(mine, extra: #","android":{"restricted_package_name":"com.other"}"#)
            #expect(package.status == .badRequest)
            #expect(String(buffer: package.body).contains("message.android.restricted_package_name"))
            let topic = try await post(client, "/v1/projects/123456789/messages:send", #"{"message":{"topic":"news"}}"#,
                                       headers: Self.bearer(access))
            #expect(topic.status == .ok)
            #expect(try json(topic)["name"]?.stringValue?.hasPrefix("projects/123456789/messages/") == true)
        }
    }

    @Test func invalidArgumentsNameTheField() async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            let access = try await f.accessToken(client: client)
            let cases: [(String, String)] = [
                (#"{"message":{"token":"T","data":{"k":1}}}"#, "message.data[\"k\"]"),
                (#"{"message":{"token":"T","android":{"ttl":"abc"}}}"#, "message.android.ttl"),
                (#"{"message":{"token":"T","android":{"ttl":"2419201s"}}}"#, "message.android.ttl"),
                (#"{"message":{"token":"T","android":{"ttl":"-1s"}}}"#, "message.android.ttl"),
                (#"{"message":{"token":"T","android":{"priority":"urgent"}}}"#, "message.android.priority"),
                (#"{"message":{"token":"T","android":{"notification":{"color":"red"}}}}"#, "message.android.notification.color"),
                (#"{"message":{"token":"T","apns":{"headers":{"apns-priority":"7"}}}}"#, "apns-priority"),
                (#"{"message":{"token":"T","webpush":{"fcm_options":{"link":"http://x"}}}}"#, "message.webpush.fcm_options.link"),
                (#"{"message":{"token":"T","fcm_options":{"analytics_label":"a b"}}}"#, "message.fcm_options.analytics_label"),
                (#"{"message":{"token":"T","bogus":1}}"#, "bogus"),
                (#"{"message":{"token":"T","notification":{"title":1}}}"#, "message.notification.title"),
                (#"{"message":{"token":"T","topic":"x"}}"#, "message.topic"),
                (#"{"message":{"data":{"k":"v"}}}"#, "message.token"),
                (#"{"message":{"token":"T","data":{"google.x":"v"}}}"#, "message.data"),
                (#"{"message":{"token":"T","data":{"k":"\#(String(repeating: "x", count: 4100))"}}}"#, "message"),
                (#"{"message":"#, "Invalid JSON payload"),
                (#"{"validate_only":"yes","message":{"token":"T"}}"#, "validate_only"),
            ]
            for (template, field) in cases {
                let body = template.replacingOccurrences(of: #""T""#, with: "\"\(token)\"")
                let response = try await post(client, "/v1/projects/123456789/messages:send", body, headers: Self.bearer(access))
                #expect(response.status == .badRequest, "\(template.prefix(80))")
                let answer = try json(response)
                #expect(answer["error"]?["status"] == "INVALID_ARGUMENT")
                #expect(answer["error"]?["message"]?.stringValue?.contains(field) == true,
                        "\(template.prefix(80)): \(answer["error"]?["message"]?.stringValue ?? "")")
            }
            #expect(try f.queue(token).isEmpty)
        }
    }

    @Test func validateOnlyAndCamelCaseFields() async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            let access = try await f.accessToken(client: client)
            let dry = try await post(client, "/v1/projects/123456789/messages:send",
                                     #"{"validate_only":true,"message":{"token":"\#(token)","data":{"a":"b"}}}"#, headers: Self.bearer(access))
            #expect(try json(dry)["name"] == "projects/123456789/messages/fake_message_id")
            #expect(try f.queue(token).isEmpty)
            let camel = try await post(client, "/v1/projects/123456789/messages:send",
                                       #"{"validateOnly":false,"message":{"token":"\#(token)","android":{"collapseKey":"k","restrictedPackageName":"com.example.app"}}}"#,
                                       headers: Self.bearer(access))
            #expect(camel.status == .ok, "\(String(buffer: camel.body))")
            #expect(try f.queue(token).first?.collapseKey == "k")
        }
    }

    @Test func namedProjectsAndStrictMode() async throws {
        let f = try Fixture(authMode: .strict, senders: ["123456789": "k"], projects: ["demo-project": "123456789"])
        let token = try await f.register()
        try await f.test { client in
            let access = try await f.accessToken(project: "demo-project", client: client)
            let body = #"{"message":{"token":"\#(token)"}}"#
            let sent = try await post(client, "/v1/projects/demo-project/messages:send", body, headers: Self.bearer(access))
            #expect(sent.status == .ok, "\(String(buffer: sent.body))")
            // The project number of the same sender is the same project.
            let byNumber = try await post(client, "/v1/projects/123456789/messages:send", body, headers: Self.bearer(access))
            #expect(byNumber.status == .ok)
            for project in ["other-project", "999"] {
                let denied = try await post(client, "/v1/projects/\(project)/messages:send", body, headers: Self.bearer(access))
                #expect(denied.status == .forbidden, "\(project)")
                #expect(try json(denied)["error"]?["status"] == "PERMISSION_DENIED")
            }
        }
    }

    @Test func permissiveNamedProjectsSendAsTheTokensSender() async throws {
        let f = try Fixture()
        let token = try await f.register(senders: ["777"])
        try await f.test { client in
            let access = try await f.accessToken(project: "demo-project", client: client)
            let sent = try await post(client, "/v1/projects/demo-project/messages:send", #"{"message":{"token":"\#(token)"}}"#,
                                      headers: Self.bearer(access))
            #expect(sent.status == .ok)
            #expect(try f.queue(token).first?.senderID == "777")
        }
    }

    @Test func theTokenEndpointRefusesWhatGoogleRefuses() async throws {
        let strict = try Fixture(authMode: .strict, senders: ["123456789": "k"])
        let permissive = try Fixture()
        let foreign = try await Assertion.sign(
            try permissive.api.keys.issue(projectID: "123456789", tokenURI: "http://x/token", nowMillis: 0))
        let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        try await strict.test { client in
            // A key this emulator did not issue: refused in strict mode.
            let refused = try await post(client, "/token", Assertion.form(foreign), headers: form)
            #expect(refused.status == .badRequest)
            #expect(try json(refused)["error"] == "invalid_grant")
            let file = try strict.api.keys.issue(projectID: "123456789", tokenURI: "http://x/token", nowMillis: 0)
            let wrongAudience = try await Assertion.sign(file, aud: "https://example.com/other")
            #expect(try json(try await post(client, "/token", Assertion.form(wrongAudience), headers: form))["error"] == "invalid_grant")
            let noScope = try await Assertion.sign(file, scope: "")
            #expect(try json(try await post(client, "/token", Assertion.form(noScope), headers: form))["error"] == "invalid_scope")
            let grant = try await post(client, "/token", "grant_type=password&assertion=x", headers: form)
            #expect(try json(grant)["error"] == "unsupported_grant_type")
            let missing = try await post(client, "/token", "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer", headers: form)
            #expect(try json(missing)["error"] == "invalid_request")
            let garbage = try await post(client, "/token", Assertion.form("a.b.c"), headers: form)
            #expect(try json(garbage)["error"] == "invalid_grant")
            let good = try await post(client, "/token", Assertion.form(try await Assertion.sign(file)), headers: form)
            #expect(try json(good)["expires_in"] == .int(3599))
            #expect(try json(good)["token_type"] == "Bearer")
        }
        try await permissive.test { client in
            // Permissive mode takes any well-formed assertion, whoever signed it.
            let other = try Fixture()
            let stranger = try await Assertion.sign(try other.api.keys.issue(projectID: "4242", tokenURI: "http://x/token", nowMillis: 0))
            let accepted = try await post(client, "/token", Assertion.form(stranger), headers: form)
            #expect(accepted.status == .ok)
        }
    }

    @Test func allowedLocationsKeepsGoogleAuthQuiet() async throws {
        try await Fixture().test { client in
            let response = try await client.execute(
                uri: "/v1/projects/-/serviceAccounts/firebase-adminsdk-abcde@demo.iam.gserviceaccount.com/allowedLocations", method: .get)
            #expect(response.status == .ok)
            #expect(try json(response) == ["encodedLocations": "0x0", "locations": []])
        }
    }
}
