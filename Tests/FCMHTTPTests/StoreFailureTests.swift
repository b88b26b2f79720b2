import StoreModel
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The one error an outside request cannot provoke: the store refusing the message.
@Suite struct StoreFailureTests {
    @Test func aFailingStoreIs503UnavailableAndUnavailable() async throws {
        let f = try Fixture()
        let token = try await f.register()
        f.engine.store.injectFailures { if case .enqueue = $0 { return true } else { return false } }
        try await f.test { client in
            let access = try await f.accessToken(client: client)
            let v1 = try await post(client, "/v1/projects/123456789/messages:send", #"{"message":{"token":"\#(token)"}}"#,
                                    headers: [.contentType: "application/json", .authorization: "Bearer \(access)"])
            // A store that cannot write (a full disk) is a passing condition: retry (docs/hardening.md).
            #expect(v1.status == .serviceUnavailable)
            #expect(v1.headers[.retryAfter] == "1")
            let error = try json(v1)["error"]
            #expect(error?["status"]?.stringValue == "UNAVAILABLE")
            #expect(error?["details"]?.arrayValue?.first?["errorCode"]?.stringValue == "UNAVAILABLE")
            let legacy = try await post(client, "/fcm/send", #"{"to":"\#(token)"}"#,
                                        headers: [.contentType: "application/json", .authorization: "key=k"])
            #expect(legacy.status == .ok)
            #expect(try json(legacy)["results"]?.arrayValue?.first?["error"]?.stringValue == "Unavailable")
        }
        f.engine.store.injectFailures(nil)
    }
}
