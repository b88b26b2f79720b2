import CCSEngine
import CCSProtocol
import PushDomain
import FCMHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

/// The Instance ID API and the v1 registrations API through Hummingbird's router test client.
@Suite struct TopicManagementAPITests {
    static let key: HTTPFields = [.contentType: "application/json", .authorization: "key=any-key"]

    @Test func batchAddAndRemoveAnswerPerTokenInOrder() async throws {
        let f = try Fixture()
        let mine = try await f.register(), theirs = try await f.register(senders: ["555"])
        let gone = try await f.register()
        try await f.engine.uninstall(token: gone)
        try await f.test { client in
            let body = JSONValue.object(["to": "/topics/movies",
                                         "registration_tokens": [.string(mine), .string(gone), .int(7), .string(theirs)]]).encoded()
            let add = try await post(client, "/iid/v1:batchAdd", body, headers: Self.key)
            #expect(add.status == .ok)
            // Permissive mode sends as each token's own sender, so `theirs` subscribes for 555.
            #expect(try json(add) == ["results": [[:], ["error": "NOT_FOUND"], ["error": "INVALID_ARGUMENT"], [:]]])
            #expect(f.engine.topics(token: mine, senderID: "123456789")?.keys.sorted() == ["movies"])
            #expect(f.engine.topics(token: theirs, senderID: "555")?.keys.sorted() == ["movies"])
            let remove = try await post(client, "/iid/v1:batchRemove", body, headers: Self.key)
            #expect(try json(remove) == ["results": [[:], ["error": "NOT_FOUND"], ["error": "INVALID_ARGUMENT"], [:]]])
            #expect(f.engine.topics(token: mine, senderID: "123456789") == [:])
        }
    }

    @Test func badBatchRequestsAre400AndBadKeys401() async throws {
        let f = try Fixture(authMode: .strict, senders: ["123456789": "right"])
        let token = try await f.register()
        try await f.test { client in
            let keyed: HTTPFields = [.contentType: "application/json", .authorization: "key=right"]
            let tooMany = JSONValue.object(["to": "/topics/t", "registration_tokens": .array((0...1000).map { .string("t\($0)") })]).encoded()
            for body in ["not json", #"{"registration_tokens":["a"]}"#, #"{"to":"/topics/a b","registration_tokens":["a"]}"#,
                         #"{"to":"/topics/t","registration_tokens":[]}"#, #"{"to":"/topics/t"}"#, tooMany] {
                let r = try await post(client, "/iid/v1:batchAdd", body, headers: keyed)
                #expect(r.status == .badRequest, "\(body.prefix(60))")
                #expect(try json(r)["error"] == "INVALID_ARGUMENT")
            }
            let wrong = try await post(client, "/iid/v1:batchAdd", #"{"to":"/topics/t","registration_tokens":["\#(token)"]}"#,
                                       headers: [.contentType: "application/json", .authorization: "key=wrong"])
            #expect(wrong.status == .unauthorized)
            let long = String(repeating: "a", count: DownstreamTarget.maximumTopicNameLength + 1)
            let tooLong = try await post(client, "/iid/v1/\(token)/rel/topics/\(long)", "", headers: keyed)
            #expect(tooLong.status == .badRequest)
        }
    }

    @Test func singleSubscribeAndInfoWithDetails() async throws {
        let f = try Fixture()
        let token = try await f.register(app: "com.example.news")
        try await f.test { client in
            let encoded = token.replacingOccurrences(of: ":", with: "%3A")
            let add = try await post(client, "/iid/v1/\(encoded)/rel/topics/a%25b", "", headers: Self.key)
            #expect(add.status == .ok)
            let info = try await client.execute(uri: "/iid/info/\(token)?details=true", method: .get, headers: Self.key)
            let body = try json(info)
            #expect(body["application"] == "com.example.news")
            #expect(body["authorizedEntity"] == "123456789")
            #expect(body["platform"] == "ANDROID")
            #expect(body["rel"]?["topics"]?["a%b"]?["addDate"] == "2023-11-14")
            let plain = try await client.execute(uri: "/iid/info/\(token)", method: .get, headers: Self.key)
            #expect(try json(plain)["rel"] == nil)
            let unknown = try await client.execute(uri: "/iid/info/nope", method: .get, headers: Self.key)
            #expect(unknown.status == .notFound)
            let noAuth = try await client.execute(uri: "/iid/info/\(token)", method: .get)
            #expect(noAuth.status == .unauthorized)
        }
    }

    @Test func v1RegistrationsSubscribeAndDelete() async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            let access = try await f.accessToken(client: client)
            let bearer: HTTPFields = [.contentType: "application/json", .authorization: "Bearer \(access)"]
            let base = "/v1/projects/123456789/registrations/\(token.replacingOccurrences(of: ":", with: "%3A"))/topicSubscriptions"
            let add = try await post(client, base + "?topic_name=weather", "{}", headers: bearer)
            #expect(add.status == .ok)
            #expect(f.engine.topics(token: token, senderID: "123456789")?.keys.sorted() == ["weather"])
            let missingName = try await post(client, base, "{}", headers: bearer)
            #expect(missingName.status == .badRequest)
            let strictDelete = try await client.execute(uri: base + "/other", method: .delete, headers: bearer)
            #expect(strictDelete.status == .notFound)
            let delete = try await client.execute(uri: base + "/weather?allow_missing=true", method: .delete, headers: bearer)
            #expect(delete.status == .ok)
            let again = try await client.execute(uri: base + "/weather?allow_missing=true", method: .delete, headers: bearer)
            #expect(again.status == .ok)
            #expect(f.engine.topics(token: token, senderID: "123456789") == [:])
            let unknown = try await post(client, "/v1/projects/123456789/registrations/nope/topicSubscriptions?topic_name=w", "{}", headers: bearer)
            #expect(unknown.status == .notFound)
            let noToken = try await post(client, base + "?topic_name=weather", "{}", headers: [.contentType: "application/json"])
            #expect(noToken.status == .unauthorized)
        }
    }
}
