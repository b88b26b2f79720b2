import CCSEngine
import CCSProtocol
import PushDomain
import StoreModel
import Foundation
import HTTPAPI
import HTTPRequestBody
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// The admin API through Hummingbird's router test client: the real routes, no socket.
@Suite struct AdminAPITests {
    final class Fixture: Sendable {
        let engine: Engine
        let clock = VirtualClock(startMillis: 1_700_000_000_000)

        init(clock wall: Bool = false) throws {
            let store = InMemoryStore()
            engine = try Engine(committer: GroupCommitter(store: store),
                                clock: wall ? WallClock() : clock, configuration: .init())
        }

        deinit { engine.committer.shutdownBlocking() }

        func test(_ body: @Sendable (any TestClientProtocol) async throws -> Void) async throws {
            let router = Router()
            AdminAPI(engine: engine, info: {
                EmulatorInfo(ccsPort: 1, devicePort: 2, httpPort: 3, caCertPath: "/ca.pem", caCertPEM: "PEM", dataDir: "/d")
            }, metricsText: { "# TYPE ccs_emulator_x counter\nccs_emulator_x 1\n" }).addRoutes(to: router)
            try await Application(router: router).test(.router, body)
        }
    }

    static func json(_ response: TestResponse) throws -> JSONValue { try JSONValue.parse(String(buffer: response.body)) }

    static func post(_ client: any TestClientProtocol, _ uri: String, _ body: String = "") async throws -> TestResponse {
        try await client.execute(uri: uri, method: .post, body: ByteBuffer(string: body))
    }

    @Test func aWebDeviceRegistersWithItsSubscriptionAndItsQueueShowsTheWebView() async throws {
        let f = try Fixture()
        try await f.test { client in
            let sub = #"{"endpoint":"https://fcm.googleapis.com/fcm/send/abc","keys":{"auth":"tBHItJI5svbpez7KI4CCXg","p256dh":"BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM"}}"#
            let missing = try await Self.post(client, "/emulator/v1/devices", #"{"app":"1:1:web:a","senders":["1"],"platform":"web"}"#)
            #expect(missing.status == .badRequest)
            let bad = try await Self.post(client, "/emulator/v1/devices",
                                          #"{"app":"1:1:web:a","senders":["1"],"platform":"web","subscription":{"endpoint":"https://e/x","keys":{"auth":"x","p256dh":"y"}}}"#)
            #expect(bad.status == .badRequest)
            #expect(try Self.json(bad)["error"]?["message"]?.stringValue?.contains("p256dh") == true)
            let created = try await Self.post(client, "/emulator/v1/devices",
                                              #"{"app":"1:1:web:a","senders":["1"],"platform":"web","subscription":"# + sub + "}")
            #expect(created.status == .created)
            let device = try Self.json(created)
            #expect(device["subscription"] == (try JSONValue.parse(sub)))
            let token = try #require(device["token"]?.stringValue)
            let sent: [SendResult] = await withCheckedContinuation { cont in
                f.engine.send(SendRequest(sender: "1", target: .token(token), message: Message(
                    messageID: "m", notification: .object(["title": .string("Hi")]),
                    webpush: .object(["fcm_options": .object(["link": .string("https://e.com/l")])])))) { cont.resume(returning: $0) }
            }
            guard case .accepted = sent.first else { Issue.record("not accepted: \(sent)"); return }
            let shown = try Self.json(try await client.execute(uri: "/emulator/v1/devices/\(token)", method: .get))
            let view = shown["queue"]?.arrayValue?.first?["view"]
            #expect(view?["platform"] == .string("web"))
            #expect(view?["notification"]?["title"] == .string("Hi"))
            #expect(view?["link"] == .string("https://e.com/l"))
            #expect(view?["presentation"] == .string("app"))
        }
    }

    @Test func aBodyThatIsNotUTF8OrRepeatsAKeyRegistersNothing() async throws {
        let f = try Fixture()
        try await f.test { client in
            var bad = ByteBuffer(string: #"{"app":"x"#)
            bad.writeBytes([0xFF, 0xFE])
            bad.writeString(#"","senders":["1"]}"#)
            let invalid = try await client.execute(uri: "/emulator/v1/devices", method: .post, body: bad)
            #expect(invalid.status == .badRequest)
            #expect(try Self.json(invalid)["error"]?["message"]?.stringValue?.contains("UTF-8") == true)
            let repeated = try await Self.post(client, "/emulator/v1/devices", #"{"app":"a","app":"b","senders":["1"]}"#)
            #expect(repeated.status == .badRequest)
            #expect(try Self.json(repeated)["error"]?["message"]?.stringValue?.contains(#"Duplicate field "app""#) == true)
            #expect(f.engine.allDevices().isEmpty)
        }
    }

    /// The test client sets Content-Length from the body it has, so the declared length is tried on a
    /// request made here: a body that never comes must not be waited for.
    @Test func aDeclaredLengthOverTheLimitIsRefusedBeforeTheBodyIsRead() async throws {
        let (stream, source) = RequestBody.makeStream()
        defer { source.finish() }  // the body never comes: collectBody must not wait for it
        for declared in ["1048577", "1000000000000", "99999999999999999999999"] {
            let request = Request(head: HTTPRequest(method: .post, scheme: "http", authority: "localhost", path: "/x",
                                                    headerFields: [.contentLength: declared]), body: stream)
            await #expect(throws: HTTPError.self, "\(declared)") { _ = try await request.collectBody(limit: 1 << 20) }
        }
        let fits = Request(head: HTTPRequest(method: .post, scheme: "http", authority: "localhost", path: "/x",
                                             headerFields: [.contentLength: "2"]), body: RequestBody(buffer: ByteBuffer(string: "{}")))
        #expect(try await fits.collectBody(limit: 1 << 20) == ByteBuffer(string: "{}"))
    }

    @Test func metricsAreServedInPrometheusTextFormat() async throws {
        try await Fixture().test { client in
            let response = try await client.execute(uri: "/metrics", method: .get)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "text/plain; version=0.0.4; charset=utf-8")
            #expect(String(buffer: response.body) == "# TYPE ccs_emulator_x counter\nccs_emulator_x 1\n")
            // The page at `/` is the dashboard's (its own target), not the admin API's.
            #expect(try await client.execute(uri: "/", method: .get).status == .notFound)
        }
    }

    @Test func journalRoutesSayTheJournalIsOffAndResetChecksTheSender() async throws {
        try await Fixture().test { client in
            for uri in ["/emulator/v1/messages", "/emulator/v1/messages/x", "/emulator/v1/events"] {
                let response = try await client.execute(uri: uri, method: .get)
                #expect(response.status == .notFound)
                #expect(try Self.json(response)["error"]?["message"]?.stringValue?.contains("journal is off") == true)
            }
            for body in [#"{"sender":"abc"}"#, #"{"sender":[1]}"#, "[1]", "nope"] {
                #expect(try await Self.post(client, "/emulator/v1/reset", body).status == .badRequest, "\(body)")
            }
            let one = try await Self.post(client, "/emulator/v1/reset?sender=123")
            #expect(one.status == .ok)
            let answer = try Self.json(one)
            #expect(answer == ["devices_removed": 0, "sender": "123"])
        }
    }

    /// Issue 10, defect 5: `{"seconds":1e20}` trapped the process (even on the wall clock).
    @Test(arguments: [#"{"seconds":1e20}"#, #"{"seconds":-1}"#, #"{"millis":9223372036854775807}"#,
                      #"{"seconds":"10"}"#, #"{"seconds":1e300,"millis":1}"#])
    func outOfRangeClockAdvancesAre400(_ body: String) async throws {
        for wall in [false, true] {
            try await Fixture(clock: wall).test { client in
                let response = try await Self.post(client, "/emulator/v1/clock/advance", body)
                #expect(response.status == .badRequest)
                #expect(try Self.json(response)["error"]?["status"] == .string("INVALID_ARGUMENT"))
            }
        }
    }

    @Test func theClockMovesAndStopsAtItsLimit() async throws {
        let f = try Fixture()
        try await f.test { client in
            let moved = try await Self.post(client, "/emulator/v1/clock/advance", #"{"seconds":1.5}"#)
            #expect(try Self.json(moved)["now_ms"] == .int(1_700_000_001_500))
            // 100 years at a time is allowed, but never past the end of year 9999.
            var last = moved.status
            for _ in 0..<90 { last = try await Self.post(client, "/emulator/v1/clock/advance", #"{"seconds":3155760000}"#).status }
            #expect(last == .badRequest)
            #expect(f.clock.nowMillis() <= VirtualClock.maximumMillis)
        }
    }

    @Test func theWallClockCannotBeAdvanced() async throws {
        try await Fixture(clock: true).test { client in
            let response = try await Self.post(client, "/emulator/v1/clock/advance", #"{"seconds":1}"#)
            #expect(response.status == .conflict)
        }
    }

    /// Issue 10, defect 10: a failed read answered 200 with an empty list.
    @Test func aFailingReadIs500NotAnEmptyAnswer() async throws {
        let f = try Fixture()
        let device = try await f.engine.registerDevice(app: "com.example.app", senders: ["1"], platform: .android)
        f.engine.store.injectReadFailures(true)
        try await f.test { client in
            for uri in ["/emulator/v1/devices", "/emulator/v1/devices/\(device.token)", "/emulator/v1/devices/\(device.token)/tray"] {
                let response = try await client.execute(uri: uri, method: .get)
                #expect(response.status == .internalServerError, "\(uri)")
                #expect(try Self.json(response)["error"]?["message"]?.stringValue?.hasPrefix("could not read") == true)
            }
        }
    }

    @Test func registerChangeStateAndUninstall() async throws {
        try await Fixture().test { client in
            let created = try await Self.post(client, "/emulator/v1/devices", #"{"app":"com.example.app","senders":["123"]}"#)
            #expect(created.status == .created)
            let token = try #require(try Self.json(created)["token"]?.stringValue)
            let state = try await Self.post(client, "/emulator/v1/devices/\(token)/state", #"{"background":true}"#)
            #expect(try Self.json(state) == .object(["foreground": .bool(false), "idle": .bool(false)]))
            #expect(try await Self.post(client, "/emulator/v1/devices/\(token)/state", #"{"sleepy":true}"#).status == .badRequest)
            #expect(try await Self.post(client, "/emulator/v1/devices/\(token)/uninstall").status == .ok)
            let shown = try Self.json(try await client.execute(uri: "/emulator/v1/devices/\(token)", method: .get))
            #expect(shown["status"] == .string("uninstalled"))
            #expect(try await Self.post(client, "/emulator/v1/devices/nope/uninstall").status == .notFound)
            #expect(try await Self.post(client, "/emulator/v1/devices", "not json").status == .badRequest)
        }
    }

    @Test func aFailedStoreWriteIs500AndChangesNothing() async throws {
        let f = try Fixture()
        let device = try await f.engine.registerDevice(app: "com.example.app", senders: ["1"], platform: .android)
        f.engine.store.injectFailures { _ in true }
        try await f.test { client in
            let response = try await Self.post(client, "/emulator/v1/devices/\(device.token)/state", #"{"idle":true}"#)
            #expect(response.status == .internalServerError)
        }
        #expect(f.engine.deviceState(token: device.token)?.idle == false)
    }

    @Test func syncAnswersOnceEverythingAcceptedIsDurable() async throws {
        let f = try Fixture()
        let device = try await f.engine.registerDevice(app: "com.example.app", senders: ["1"], platform: .android)
        f.engine.send(SendRequest(sender: "1", target: .token(device.token), message: Message(messageID: "m", data: ["k": "v"]))) { _ in }
        try await f.test { client in
            let response = try await Self.post(client, "/emulator/v1/store/sync")
            #expect(response.status == .ok)
            #expect(try Self.json(response)["durable"] == .bool(true))
        }
        #expect(try f.engine.store.queuedMessages(token: device.token).count == 1)
    }

    @Test func resetRemovesDevicesAndKeepsTheRest() async throws {
        let f = try Fixture()
        _ = try await f.engine.registerDevice(app: "com.example.app", senders: ["1"], platform: .android)
        try await f.test { client in
            let response = try await Self.post(client, "/emulator/v1/reset")
            #expect(try Self.json(response)["devices_removed"] == .int(1))
            let list = try Self.json(try await client.execute(uri: "/emulator/v1/devices", method: .get))
            #expect(list["devices"] == .array([]))
        }
    }

    @Test func tappingWhatIsNotInTheTrayIs404() async throws {
        let f = try Fixture()
        let device = try await f.engine.registerDevice(app: "com.example.app", senders: ["1"], platform: .android)
        try await f.test { client in
            let response = try await Self.post(client, "/emulator/v1/devices/\(device.token)/tray/0:1%25abc/tap")
            #expect(response.status == .notFound)
        }
    }
}
