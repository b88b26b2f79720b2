import CCSStore
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The one error an outside request cannot provoke: the store refusing the message.
@Suite struct StoreFailureTests {
    @Test func aFailingStoreIs500InternalAndInternalServerError() async throws {
        let f = try Fixture()
        let token = try await f.register()
        f.engine.store.injectFailures { if case .enqueue = $0 { return true } else { return false } }
        try await f.test { client in
            let access = try await f.accessToken(client: client)
            let v1 = try await post(client, "/v1/projects/123456789/messages:send", #"{"message":{"token":"\#(token)"}}"#,
                                    headers: [.contentType: "application/json", .authorization: "Bearer \(access)"])
            #expect(v1.status == .internalServerError)
            let error = try json(v1)["error"]
            #expect(error?["status"]?.stringValue == "INTERNAL")
            #expect(error?["details"]?.arrayValue?.first?["errorCode"]?.stringValue == "INTERNAL")
            let legacy = try await post(client, "/fcm/send", #"{"to":"\#(token)"}"#,
                                        headers: [.contentType: "application/json", .authorization: "key=k"])
            #expect(legacy.status == .ok)
            #expect(try json(legacy)["results"]?.arrayValue?.first?["error"]?.stringValue == "InternalServerError")
        }
        f.engine.store.injectFailures(nil)
    }
}
