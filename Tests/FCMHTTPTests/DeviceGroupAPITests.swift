import CCSEngine
import CCSProtocol
import PushDomain
import FCMHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

/// `/fcm/notification` and `/gcm/notification` (management) and group sends on `/fcm/send`, through
/// Hummingbird's router test client.
@Suite struct DeviceGroupAPITests {
    static func headers(project: String? = "123456789", key: String? = "key=any-key") -> HTTPFields {
        var h: HTTPFields = [.contentType: "application/json"]
        if let key { h[.authorization] = key }
        if let project { h[.init("project_id")!] = project }
        return h
    }

    func manage(_ client: any TestClientProtocol, _ body: JSONValue, path: String = "/fcm/notification",
                headers: HTTPFields = DeviceGroupAPITests.headers()) async throws -> (HTTPResponse.Status, JSONValue) {
        let response = try await post(client, path, body.encoded(), headers: headers)
        return (response.status, try json(response))
    }

    func create(_ client: any TestClientProtocol, _ name: String, _ tokens: [String]) async throws -> String {
        let (status, body) = try await manage(client, ["operation": "create", "notification_key_name": .string(name),
                                                       "registration_ids": .array(tokens.map(JSONValue.string))])
        #expect(status == .ok, "\(body)")
        return try #require(body["notification_key"]?.stringValue)
    }

    @Test(arguments: ["/fcm/notification", "/gcm/notification"])
    func createGetAddRemove(_ path: String) async throws {
        let f = try Fixture()
        let a = try await f.register(), b = try await f.register()
        try await f.test { client in
            let (status, created) = try await manage(client, ["operation": "create", "notification_key_name": "appUser-Chris",
                                                               "registration_ids": [.string(a)]], path: path)
            #expect(status == .ok)
            let key = try #require(created["notification_key"]?.stringValue)
            #expect(key.hasPrefix("APA91b"))

            // A lookup answers another encoding of the same group; both keys work.
            let lookup = try await client.execute(uri: "\(path)?notification_key_name=appUser-Chris", method: .get,
                                                  headers: Self.headers())
            #expect(lookup.status == .ok)
            let other = try #require(try json(lookup)["notification_key"]?.stringValue)
            #expect(other != key && NotificationKey.groupID(of: other) == NotificationKey.groupID(of: key))

            let (addStatus, added) = try await manage(client, ["operation": "add", "notification_key": .string(other),
                                                              "notification_key_name": "appUser-Chris",
                                                              "registration_ids": [.string(b)]], path: path)
            #expect(addStatus == .ok && added["notification_key"] == .string(other))
            #expect(f.engine.deviceGroups(sender: "123456789").first?.members == [a, b])

            let (removeStatus, _) = try await manage(client, ["operation": "remove", "notification_key": .string(key),
                                                             "registration_ids": [.string(a), .string(b)]], path: path)
            #expect(removeStatus == .ok)
            // The last member removed: the group is gone.
            #expect(f.engine.deviceGroups(sender: "123456789").isEmpty)
            let (goneStatus, gone) = try await manage(client, ["operation": "add", "notification_key": .string(key),
                                                              "registration_ids": [.string(a)]], path: path)
            #expect(goneStatus == .badRequest && gone == ["error": "notification_key not found"])
        }
    }

    @Test func everyRuleHasItsError() async throws {
        let f = try Fixture()
        let a = try await f.register()
        let foreign = try await f.register(senders: ["42"])
        let many = try await (0..<21).asyncMap { _ in try await f.register() }
        try await f.test { client in
            let key = try await create(client, "n", [a])
            let cases: [(JSONValue, String)] = [
                (["operation": "create", "notification_key_name": "n", "registration_ids": [.string(a)]], "notification_key already exists"),
                (["operation": "create", "notification_key_name": "m", "registration_ids": [.string(foreign), "junk"]], "no valid registration ids"),
                (["operation": "create", "notification_key_name": "m", "registration_ids": .array(many.map(JSONValue.string))],
                 "notification_key has reached the maximum number of members (20)"),
                (["operation": "add", "notification_key": .string(key), "notification_key_name": "wrong", "registration_ids": [.string(a)]],
                 "notification_key_name doesn't match the group name of the notification_key"),
                (["operation": "add", "notification_key": "APA91bnonsense", "registration_ids": [.string(a)]], "notification_key not found"),
                (["operation": "remove", "notification_key": .string(key), "registration_ids": [.string(foreign)]], "no valid registration ids"),
            ]
            for (body, error) in cases {
                let (status, answer) = try await manage(client, body)
                #expect(status == .badRequest && answer == ["error": .string(error)], "\(body.encoded()) → \(answer)")
            }
            let missing = try await client.execute(uri: "/fcm/notification?notification_key_name=nope", method: .get, headers: Self.headers())
            let missingBody = try json(missing)
            #expect(missing.status == .badRequest && missingBody == ["error": "notification_key not found"])
        }
    }

    @Test func badInputIsRefusedWithAReason() async throws {
        let f = try Fixture()
        try await f.test { client in
            let bodies: [String] = [
                "", "[]", "{\"operation\":1}", "{}", "{\"operation\":\"delete\"}",
                "{\"operation\":\"create\",\"registration_ids\":[\"a\"]}",
                "{\"operation\":\"create\",\"notification_key_name\":\"n\",\"registration_ids\":\"a\"}",
                "{\"operation\":\"create\",\"notification_key_name\":\"n\",\"registration_ids\":[1]}",
                "{\"operation\":\"add\",\"registration_ids\":[\"a\"]}",
                "{\"operation\":\"create\",\"notification_key_name\":\"\(String(repeating: "x", count: 257))\",\"registration_ids\":[\"a\"]}",
                JSONValue.object(["operation": "create", "notification_key_name": "n",
                                  "registration_ids": .array((0..<1001).map { .string("t\($0)") })]).encoded(),
            ]
            for body in bodies {
                let response = try await post(client, "/fcm/notification", body, headers: Self.headers())
                #expect(response.status == .badRequest, "\(body.prefix(80))")
                #expect(try json(response)["error"]?.stringValue?.isEmpty == false)
            }
            let noName = try await client.execute(uri: "/fcm/notification", method: .get, headers: Self.headers())
            #expect(noName.status == .badRequest)
        }
    }

    @Test func theCallerIsCheckedByProjectAndKey() async throws {
        let f = try Fixture(authMode: .strict, senders: ["123456789": "key-a", "42": "key-b"])
        let a = try await f.register()
        try await f.test { client in
            let body = JSONValue.object(["operation": "create", "notification_key_name": "n", "registration_ids": [.string(a)]])
            for (headers, status) in [(Self.headers(key: "key=key-b"), HTTPResponse.Status.unauthorized),
                                      (Self.headers(key: nil), .unauthorized),
                                      (Self.headers(key: "Bearer x"), .unauthorized),
                                      (Self.headers(project: "777", key: "key=key-a"), .unauthorized),
                                      (Self.headers(project: nil, key: "key=key-a"), .badRequest),
                                      (Self.headers(project: "not-a-number", key: "key=key-a"), .badRequest)] {
                let (got, answer) = try await manage(client, body, headers: headers)
                #expect(got == status, "\(headers) → \(answer)")
                #expect(answer["error"] != nil)
            }
            let (ok, created) = try await manage(client, body, headers: Self.headers(key: "key=key-a"))
            #expect(ok == .ok)
            // Sender 42 does not see sender 123456789's group, by name or by key.
            let lookup = try await client.execute(uri: "/fcm/notification?notification_key_name=n", method: .get,
                                                  headers: Self.headers(project: "42", key: "key=key-b"))
            #expect(lookup.status == .badRequest)
            let (status, _) = try await manage(client, ["operation": "remove", "notification_key": created["notification_key"] ?? .null,
                                                        "registration_ids": [.string(a)]],
                                               headers: Self.headers(project: "42", key: "key=key-b"))
            #expect(status == .badRequest)
        }
    }

    @Test func aSendToTheKeyCountsTheMembers() async throws {
        let f = try Fixture()
        let ok = try await f.register(), gone = try await f.register()
        try await f.test { client in
            let key = try await create(client, "n", [ok, gone])
            try await f.engine.uninstall(token: gone)
            for body in [#"{"to":"\#(key)","data":{"a":"b"}}"#, #"{"notification_key":"\#(key)","data":{"a":"b"}}"#] {
                let response = try await post(client, "/fcm/send", body, headers: [.contentType: "application/json", .authorization: "key=k"])
                #expect(response.status == .ok)
                let answer = try json(response)
                if body.contains("\"to\"") {
                    #expect(answer == ["success": 1, "failure": 1, "failed_registration_ids": [.string(gone)]])
                } else {
                    // The first send pruned the uninstalled member.
                    #expect(answer == ["success": 1, "failure": 0])
                }
            }
            #expect(try f.queue(ok).count == 2)
            let stranger = NotificationKey.make(groupID: NotificationKey.newGroupID())
            let response = try await post(client, "/fcm/send", #"{"to":"\#(stranger)"}"#,
                                          headers: [.contentType: "application/json", .authorization: "key=k"])
            #expect(try json(response)["results"] == [["error": "NotRegistered"]])
        }
    }

    @Test func v1ReachesTheGroupByTokenAndThePlainTextFormAnswersLines() async throws {
        let f = try Fixture()
        let member = try await f.register()
        try await f.test { client in
            let key = try await create(client, "v1", [member])
            let access = try await f.accessToken(client: client)
            let bearer: HTTPFields = [.contentType: "application/json", .authorization: "Bearer \(access)"]
            let body = #"{"message":{"token":"\#(key)","data":{"k":"v"}}}"#
            let sent = try await post(client, "/v1/projects/123456789/messages:send", body, headers: bearer)
            #expect(sent.status == .ok)
            #expect(try json(sent)["name"]?.stringValue?.hasPrefix("projects/123456789/messages/0:") == true)
            #expect(try f.queue(member).count == 1)

            let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded", .authorization: "key=k"]
            let text = try await post(client, "/fcm/send", "registration_id=\(key)&data.a=b", headers: form)
            #expect(String(buffer: text.body) == "success=1\nfailure=0\n")

            // Every member failed: v1 answers the member's error.
            try await f.engine.uninstall(token: member)
            let failed = try await post(client, "/v1/projects/123456789/messages:send", body, headers: bearer)
            #expect(failed.status == .notFound)
            let lines = try await post(client, "/fcm/send", "registration_id=\(key)&data.a=b", headers: form)
            #expect(String(buffer: lines.body) == "success=0\nfailure=0\n") // pruned by the v1 send
        }
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for e in self { out.append(try await transform(e)) }
        return out
    }
}
