import CCSEngine
import CCSProtocol
import PushDomain
import FCMHTTP
import Foundation
import GoogleAuth
import Hummingbird
import HummingbirdTesting
import Testing

/// The client-side `POST /gcm/googlenotification` (an `id_token` instead of the server key) and the
/// ID tokens of `POST /emulator/v1/id-tokens`, through Hummingbird's router test client.
@Suite struct ClientDeviceGroupAPITests {
    static let path = "/gcm/googlenotification"
    static func headers(project: String? = "123456789") -> HTTPFields {
        var h: HTTPFields = [.contentType: "application/json"]
        if let project { h[.init("project_id")!] = project }
        return h
    }

    func idToken(_ client: any TestClientProtocol, email: String = "chris@example.com") async throws -> String {
        let response = try await post(client, "/emulator/v1/id-tokens", #"{"email":"\#(email)"}"#, headers: [.contentType: "application/json"])
        #expect(response.status == .ok)
        return try #require(try json(response)["id_token"]?.stringValue)
    }

    func manage(_ client: any TestClientProtocol, _ body: JSONValue, token: String?,
                headers: HTTPFields = ClientDeviceGroupAPITests.headers()) async throws -> (HTTPResponse.Status, JSONValue) {
        var body = body
        if let token, case .object(var o) = body { o["id_token"] = .string(token); body = .object(o) }
        let response = try await post(client, Self.path, body.encoded(), headers: headers)
        return (response.status, try json(response))
    }

    @Test func everyOperationSharesItsGroupsWithTheServerSide() async throws {
        let f = try Fixture()
        let a = try await f.register(), b = try await f.register()
        try await f.test { client in
            let token = try await idToken(client)
            let (status, created) = try await manage(client, ["operation": "create", "notification_key_name": "appUser-Chris",
                                                               "registration_ids": [.string(a)]], token: token)
            #expect(status == .ok, "\(created)")
            let key = try #require(created["notification_key"]?.stringValue)
            // The server side finds the group the client side made.
            let lookup = try await client.execute(uri: "/fcm/notification?notification_key_name=appUser-Chris", method: .get,
                                                  headers: [.authorization: "key=k", .init("project_id")!: "123456789"])
            #expect(lookup.status == .ok)
            let (added, _) = try await manage(client, ["operation": "add", "notification_key": .string(key),
                                                       "notification_key_name": "appUser-Chris", "registration_ids": [.string(b)]], token: token)
            #expect(added == .ok)
            #expect(f.engine.deviceGroups(sender: "123456789").first?.members == [a, b])
            let (removed, _) = try await manage(client, ["operation": "remove", "notification_key": .string(key),
                                                         "registration_ids": [.string(a)]], token: token)
            #expect(removed == .ok)
            #expect(f.engine.deviceGroups(sender: "123456789").first?.members == [b])
            // A send to the key reaches the remaining member.
            let sent = try await post(client, "/fcm/send", #"{"to":"\#(key)","data":{"a":"b"}}"#,
                                      headers: [.contentType: "application/json", .authorization: "key=k"])
            #expect(try json(sent) == ["success": 1, "failure": 0])
            #expect(try f.queue(b).count == 1)
        }
    }

    @Test func theErrorsAreTheServerSidesInTheSameWords() async throws {
        let f = try Fixture()
        let a = try await f.register()
        try await f.test { client in
            let token = try await idToken(client)
            let body: JSONValue = ["operation": "create", "notification_key_name": "n", "registration_ids": [.string(a)]]
            let (first, _) = try await manage(client, body, token: token)
            #expect(first == .ok)
            let cases: [(JSONValue, String)] = [
                (body, "notification_key already exists"),
                (["operation": "create", "notification_key_name": "m", "registration_ids": ["junk"]], "no valid registration ids"),
                (["operation": "add", "notification_key": "APA91bnonsense", "registration_ids": [.string(a)]], "notification_key not found"),
            ]
            for (body, error) in cases {
                let (status, answer) = try await manage(client, body, token: token)
                #expect(status == .badRequest && answer == ["error": .string(error)], "\(answer)")
                // The server side answers the same words.
                let server = try await post(client, "/fcm/notification", body.encoded(),
                                            headers: [.contentType: "application/json", .authorization: "key=k", .init("project_id")!: "123456789"])
                #expect(try json(server) == answer)
            }
        }
    }

    @Test func theIDTokenIsChecked() async throws {
        let f = try Fixture()
        let a = try await f.register()
        let stranger = IDTokenIssuer().issue(email: "x@example.com", audience: "a", nowSeconds: f.clock.nowMillis() / 1000)
        try await f.test { client in
            let body: JSONValue = ["operation": "create", "notification_key_name": "n", "registration_ids": [.string(a)]]
            let token = try await idToken(client)
            for (bad, text) in [(nil, "the request has no id_token"), ("junk", "not a Google ID token"),
                                (stranger, "not a Google ID token"), (String(token.dropLast(2)) + "AA", "not a Google ID token")] as [(String?, String)] {
                let (status, answer) = try await manage(client, body, token: bad)
                #expect(status == .unauthorized && answer["error"]?.stringValue?.contains(text) == true, "\(answer)")
            }
            let (noProject, _) = try await manage(client, body, token: token, headers: Self.headers(project: nil))
            #expect(noProject == .badRequest)
            let wrongType = try await post(client, Self.path, #"{"operation":"create","id_token":7}"#, headers: Self.headers())
            #expect(wrongType.status == .badRequest)
            // An hour later on the engine's clock the token has expired.
            _ = f.clock.advance(byMillis: 3_600_000)
            let (expired, answer) = try await manage(client, body, token: token)
            #expect(expired == .unauthorized && answer == ["error": "Unauthorized: the id_token has expired"])
            for request in ["", "{}", #"{"email":"nobody"}"#, #"{"email":"a@b","audience":""}"#] {
                let refused = try await post(client, "/emulator/v1/id-tokens", request, headers: [.contentType: "application/json"])
                #expect(refused.status == .badRequest, "\(request)")
            }
        }
    }

    @Test func anIssuedTokenCarriesGooglesClaims() throws {
        let issuer = IDTokenIssuer()
        let token = issuer.issue(email: "chris@example.com", audience: "web-client", nowSeconds: 1000)
        let claims = try issuer.verify(token, nowSeconds: 1001).get()
        #expect(claims.email == "chris@example.com" && claims.audience == "web-client" && claims.expiresAt == 4600)
        #expect(claims.subject.count == 21 && claims.subject.allSatisfy(\.isNumber))
        #expect(issuer.verify(token, nowSeconds: 4600) == .failure(.expired))
    }
}
