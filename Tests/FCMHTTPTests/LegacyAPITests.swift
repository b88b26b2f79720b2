import CCSEngine
import CCSProtocol
import PushDomain
import FCMHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

/// `/fcm/send` and `/gcm/send` through Hummingbird's router test client: the real routes, no socket.
@Suite struct LegacyAPITests {
    static let key: HTTPFields = [.contentType: "application/json", .authorization: "key=any-key"]
    static let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded;charset=UTF-8", .authorization: "key=any-key"]

    @Test(arguments: ["/fcm/send", "/gcm/send"])
    func aSendToOneTokenIsQueuedAndAnsweredWithAllFourNumbers(_ path: String) async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            let response = try await post(client, path, #"{"to":"\#(token)","data":{"k":"v"},"time_to_live":60}"#, headers: Self.key)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
            let body = try json(response)
            #expect(body["success"] == .int(1))
            #expect(body["failure"] == .int(0))
            #expect(body["canonical_ids"] == .int(0))
            #expect(body["multicast_id"]?.intValue.map { $0 > 0 } == true)
            let id = try #require(body["results"]?.arrayValue?.first?["message_id"]?.stringValue)
            #expect(DeviceMessageID.looksValid(id))
            let queued = try f.queue(token)
            #expect(queued.map(\.deviceMessageID) == [id])
            #expect(queued.first?.timeToLive == 60)
            #expect(queued.first?.senderID == "123456789")
        }
    }

    @Test func theAuthorizationHeaderIsReadWithoutCaseAndSurroundingSpace() async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            let body = #"{"to":"\#(token)"}"#
            for accepted in ["key=k", "KEY=k", "Key = k", " \tkey=k\t ", "key=  k  "] {
                let r = try await post(client, "/fcm/send", body, headers: [.contentType: "Application/JSON", .authorization: accepted])
                #expect(r.status == .ok, "\(accepted)")
                #expect(try json(r)["success"] == .int(1), "\(accepted)")
            }
            for refused in ["", "   ", "k", "keyk", "key", "key=", "key=  ", "token k", "Bearer not-a-token", "bearer"] {
                let r = try await post(client, "/fcm/send", body, headers: [.contentType: "application/json", .authorization: refused])
                #expect(r.status == .unauthorized, "\(refused)")
            }
        }
    }

    @Test func onlyJSONAndThePlainTextFormAreRead() async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            let body = #"{"to":"\#(token)","data":{"k":"v"}}"#
            for type in ["text/xml", "text/plain", "multipart/form-data; boundary=x", "application/xml"] {
                let r = try await post(client, "/fcm/send", body, headers: [.contentType: type, .authorization: "key=k"])
                #expect(r.status == .badRequest, "\(type)")
                #expect(String(buffer: r.body).contains("application/json"), "\(type)")
            }
            #expect(try f.queue(token).isEmpty, "nothing refused was stored")
            for type in ["application/json; charset=UTF-8", "application/merge-patch+json"] {
                let r = try await post(client, "/fcm/send", body, headers: [.contentType: type, .authorization: "key=k"])
                #expect(r.status == .ok, "\(type)")
            }
            // No Content-Type: a body starting with { is JSON, as before.
            #expect(try await post(client, "/fcm/send", body, headers: [.authorization: "key=k"]).status == .ok)
        }
    }

    @Test func aRepeatedKeyOrBytesThatAreNotUTF8AreA400() async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            let repeated = try await post(client, "/fcm/send", #"{"to":"\#(token)","to":"\#(token)"}"#, headers: Self.key)
            #expect(repeated.status == .badRequest)
            #expect(String(buffer: repeated.body).contains("Duplicate field"))
            var bad = ByteBuffer(string: #"{"to":"\#(token)","data":{"k":""#)
            bad.writeBytes([0xFF, 0xFE])
            bad.writeString(#""}}"#)
            let invalid = try await client.execute(uri: "/fcm/send", method: .post, headers: Self.key, body: bad)
            #expect(invalid.status == .badRequest)
            #expect(String(buffer: invalid.body).contains("UTF-8"))
            #expect(try f.queue(token).isEmpty)
        }
    }

    @Test func registrationIDsAnswerInRequestOrder() async throws {
        let f = try Fixture()
        let first = try await f.register()
        let second = try await f.register(senders: ["555"])
        let uninstalled = try await f.register()
        try await f.engine.uninstall(token: uninstalled)
        try await f.test { client in
            let ids = [first, "not-a-token", second, uninstalled]
            let list = ids.map { JSONValue.string($0) }
            let response = try await post(client, "/fcm/send", JSONValue.object(["registration_ids": .array(list), "data": ["a": "b"]]).encoded(),
                                          headers: Self.key)
            #expect(response.status == .ok)
            let body = try json(response)
            #expect(body["success"] == .int(2))
            #expect(body["failure"] == .int(2))
            let results = try #require(body["results"]?.arrayValue)
            #expect(results.count == 4)
            #expect(results[0]["message_id"]?.stringValue.map(DeviceMessageID.looksValid) == true)
            #expect(results[1] == ["error": "InvalidRegistration"])
            #expect(results[2]["message_id"] != nil)
            #expect(results[3] == ["error": "NotRegistered"])
            // Permissive: each token is sent as its own sender.
            #expect(try f.queue(second).first?.senderID == "555")
            #expect(try f.queue(first).first?.senderID == "123456789")
        }
    }

    @Test func strictModeFindsTheSenderByItsKey() async throws {
        let f = try Fixture(authMode: .strict, senders: ["123456789": "key-a", "42": "key-b"])
        let mine = try await f.register(senders: ["123456789"])
        let theirs = try await f.register(senders: ["42"])
        try await f.test { client in
            let body = JSONValue.object(["registration_ids": [.string(mine), .string(theirs)]]).encoded()
            let response = try await post(client, "/fcm/send", body, headers: [.contentType: "application/json", .authorization: "key=key-a"])
            let results = try #require(try json(response)["results"]?.arrayValue)
            #expect(results[0]["message_id"] != nil)
            #expect(results[1] == ["error": "MismatchSenderId"])

            for auth in ["key=wrong", "key=", "Basic abc"] {
                let refused = try await post(client, "/fcm/send", body, headers: [.contentType: "application/json", .authorization: auth])
                #expect(refused.status == .unauthorized, "\(auth)")
            }
            let none = try await post(client, "/fcm/send", body, headers: [.contentType: "application/json"])
            #expect(none.status == .unauthorized)
        }
    }

    @Test func badBodiesAre400WithAReason() async throws {
        let f = try Fixture()
        try await f.test { client in
            let cases: [(String, String)] = [
                ("{\"to\":", "JSON_PARSING_ERROR"),
                ("[1]", "JSON_PARSING_ERROR"),
                (#"{"to":"x","time_to_live":"abc"}"#, "time_to_live"),
                (#"{"registration_ids":"x"}"#, "registration_ids"),
                (#"{"registration_ids":[1]}"#, "registration_ids"),
                (#"{"to":"x","restricted_package_name":5}"#, "restricted_package_name"),
                (#"{"to":"x","data":"nope"}"#, "data"),
            ]
            for (body, mention) in cases {
                let response = try await post(client, "/fcm/send", body, headers: Self.key)
                #expect(response.status == .badRequest, "\(body)")
                #expect(String(buffer: response.body).contains(mention), "\(body): \(String(buffer: response.body))")
            }
            let many = JSONValue.object(["registration_ids": .array((0...1000).map { .string("t\($0)") })]).encoded()
            let tooMany = try await post(client, "/fcm/send", many, headers: Self.key)
            #expect(tooMany.status == .badRequest)
            #expect(String(buffer: tooMany.body).contains("exceeds maximum allowed (1000)"))
        }
    }

    @Test func messageErrorsAreResultsAsTheLegacyAPIGaveThem() async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            let cases: [(String, String)] = [
                (#"{"data":{"a":"b"}}"#, "MissingRegistration"),
                (#"{"registration_ids":[]}"#, "MissingRegistration"),
                (#"{"to":"\#(token)","time_to_live":2419201}"#, "InvalidTtl"),
                (#"{"to":"\#(token)","data":{"from":"x"}}"#, "InvalidDataKey"),
                (#"{"to":"\#(token)","data":{"k":"\#(String(repeating: "x", count: 4100))"}}"#, "MessageTooBig"),
                (#"{"to":"\#(token)","priority":"urgent"}"#, "InvalidParameters"),
                (#"{"to":"\#(token)","registration_ids":["\#(token)"]}"#, "InvalidParameters"),
            ]
            for (body, error) in cases {
                let response = try await post(client, "/fcm/send", body, headers: Self.key)
                #expect(response.status == .ok, "\(error)")
                let answer = try json(response)
                #expect(answer["failure"] == .int(1), "\(error)")
                #expect(answer["results"]?.arrayValue?.first?["error"] == .string(error), "\(body.prefix(80))")
            }
            #expect(try f.queue(token).isEmpty)
        }
    }

    @Test func restrictedPackageNameAndDryRun() async throws {
        let f = try Fixture()
        let token = try await f.register(app: "com.example.app")
        try await f.test { client in
            let wrong = try await post(client, "/fcm/send", #"{"to":"\#(token)","restricted_package_name":"com.other"}"#, headers: Self.key)
            #expect(try json(wrong)["results"]?.arrayValue?.first == ["error": "InvalidPackageName"])
            let dry = try await post(client, "/fcm/send", #"{"to":"\#(token)","dry_run":true,"data":{"a":"b"}}"#, headers: Self.key)
            #expect(try json(dry)["results"]?.arrayValue?.first == ["message_id": "fake_message_id"])
            #expect(try f.queue(token).isEmpty)
            let right = try await post(client, "/fcm/send", #"{"to":"\#(token)","restricted_package_name":"com.example.app"}"#, headers: Self.key)
            #expect(try json(right)["success"] == .int(1))
        }
    }

    @Test func plainTextRequestsGetPlainTextAnswers() async throws {
        let f = try Fixture()
        let token = try await f.register()
        let gone = try await f.register()
        try await f.engine.uninstall(token: gone)
        try await f.test { client in
            let sent = try await post(client, "/fcm/send", "registration_id=\(token)&collapse_key=c1&data.greeting=hello+world&data.n=%C3%A9&time_to_live=30",
                                      headers: Self.form)
            #expect(sent.status == .ok)
            #expect(sent.headers[.contentType]?.hasPrefix("text/plain") == true)
            let text = String(buffer: sent.body).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(text.hasPrefix("id=0:"))
            let queued = try #require(try f.queue(token).first)
            #expect(queued.collapseKey == "c1")
            #expect(queued.timeToLive == 30)
            #expect(queued.payload.contains(#""greeting":"hello world""#))
            #expect(queued.payload.contains(#""n":"é""#))

            let missing = try await post(client, "/gcm/send", "data.a=b", headers: Self.form)
            #expect(String(buffer: missing.body) == "Error=MissingRegistration\n")
            let unregistered = try await post(client, "/gcm/send", "registration_id=\(gone)", headers: Self.form)
            #expect(String(buffer: unregistered.body) == "Error=NotRegistered\n")
            let broken = try await post(client, "/gcm/send", "registration_id=%zz", headers: Self.form)
            #expect(broken.status == .badRequest)
            // No Content-Type at all means plain text, as FCM read it.
            let bare = try await post(client, "/gcm/send", "registration_id=unknown", headers: [.authorization: "key=k"])
            #expect(String(buffer: bare.body) == "Error=InvalidRegistration\n")
        }
    }

    @Test func topicAndConditionSendsAnswerWithANumber() async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            // Permissive mode: a key names no sender until a sender used it (here: to subscribe a token).
            let unknown = try await post(client, "/fcm/send", #"{"to":"/topics/news"}"#, headers: Self.key)
            #expect(unknown.status == .unauthorized)
            let add = try await post(client, "/iid/v1:batchAdd", #"{"to":"/topics/news","registration_tokens":["\#(token)"]}"#, headers: Self.key)
            #expect(try json(add) == ["results": [[:]]])
            for body in [#"{"to":"/topics/news","data":{"a":"b"}}"#, #"{"condition":"'news' in topics","data":{"c":"d"}}"#] {
                let response = try await post(client, "/fcm/send", body, headers: Self.key)
                #expect(response.status == .ok, "\(body)")
                #expect(try json(response)["message_id"]?.intValue.map { $0 > 0 } == true, "\(body)")
            }
            #expect(try f.queue(token).count == 2)
            // Device groups are built: a notification_key of no group is not registered.
            let group = try await post(client, "/fcm/send", #"{"notification_key":"abc"}"#, headers: Self.key)
            #expect(try json(group)["results"] == [["error": "NotRegistered"]])
            // A malformed topic is still a validation error, as in CCS.
            let bad = try await post(client, "/fcm/send", #"{"to":"/topics/a b"}"#, headers: Self.key)
            #expect(try json(bad)["results"]?.arrayValue?.first == ["error": "InvalidParameters"])
        }
    }
}
