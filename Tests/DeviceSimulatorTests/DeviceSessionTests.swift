import CCSProtocol
import PushDomain
import Locking
import NIOPosix
import Testing
@testable import DeviceSimulator

/// The simulated device's session without a server: the commands it answers itself (refusals) and
/// its offline upstream cache. Nothing here connects: the session has credentials but no connection,
/// and its HTTP port refuses (a request made by mistake fails the test).
@Suite struct DeviceSessionTests {
    final class Lines: Sendable {
        let list = Locked<[String]>([])
        var all: [JSONValue] { list.withLock { $0 }.map { (try? JSONValue.parse($0)) ?? .string($0) } }
    }

    /// A registered device that is offline; what it prints goes to `lines`.
    static func offlineDevice(_ lines: Lines) -> DeviceSession {
        let group = MultiThreadedEventLoopGroup.singleton
        var session = DeviceSession(http: HTTPJSONClient(host: "127.0.0.1", port: 1, group: group), group: group,
                                    host: "127.0.0.1", baseURL: "http://127.0.0.1:1",
                                    output: { line in lines.list.withLock { $0.append(line) } })
        session.credentials = DeviceCredentials(token: "tok", deviceID: "d1", secret: "s", app: "com.example.app",
                                                senders: ["4711", "4712"], platform: "android")
        return session
    }

    static func upstream(_ id: Int) -> DeviceCommandLine {
        .upstream(["message_id": .string("u\(id)"), "data": .object(["n": .string("\(id)")])])
    }

    @Test(arguments: [
        // Each line, as read from stdin, and the error event's text.
        ("hello there", "not a command: hello there"),
        (#"{"refresh":"everything"}"#, #"not a command: {"refresh":"everything"}"#),
        (#"{"go":"sideways"}"#, #"unknown state "sideways""#),
        (#"{"show":"topics"}"#, #"unknown view "topics" (groups)"#),
    ])
    func refusedLine(_ line: String, _ error: String) async throws {
        let lines = Lines()
        var session = Self.offlineDevice(lines)
        try await session.handle(try #require(DeviceCommandLine(line: line)))
        #expect(lines.all == [.object(["event": .string("error"), "error": .string(error)])])
    }

    @Test func withoutARegistrationNothingIsDone() async throws {
        let lines = Lines()
        var session = Self.offlineDevice(lines)
        session.credentials = nil
        try await session.handle(.invalid("hello"))
        try await session.handle(Self.upstream(1))
        #expect(lines.all.isEmpty)
        #expect(session.cachedUpstream.isEmpty)
    }

    /// Offline, the first 20 upstream messages wait in order (they go out in that order on reconnect);
    /// the 21st and later are refused with TOO_MANY_PENDING_MESSAGES and the waiting ones stay.
    @Test func offlineCacheHoldsTwentyAndRefusesTheNewest() async throws {
        let lines = Lines()
        var session = Self.offlineDevice(lines)
        #expect(DeviceSession.maxCachedUpstream == 20)
        for i in 1...20 { try await session.handle(Self.upstream(i)) }
        #expect(lines.all.isEmpty)
        #expect(session.cachedUpstream.map { $0["message_id"] } == (1...20).map { .string("u\($0)") })

        try await session.handle(Self.upstream(21))
        try await session.handle(Self.upstream(22))
        #expect(lines.all == [21, 22].map {
            .object(["event": .string("send_error"), "message_id": .string("u\($0)"),
                     "error": .string("TOO_MANY_PENDING_MESSAGES")])
        })
        #expect(session.cachedUpstream.map { $0["message_id"] } == (1...20).map { .string("u\($0)") })
    }

    /// What the client library adds to an upstream message: `to` (the first sender), a message id,
    /// and only the data values that are strings.
    @Test func cachedUpstreamIsCompleted() async throws {
        let lines = Lines()
        var session = Self.offlineDevice(lines)
        try await session.handle(.upstream(["data": .object(["a": .string("x"), "b": .int(1), "c": .bool(true),
                                                             "d": .null, "e": .object([:])])]))
        try await session.handle(.upstream(["to": .string("group-key"), "message_id": .string("mine"),
                                            "time_to_live": .int(0)]))
        try await session.handle(.upstream([:]))
        let cached = session.cachedUpstream
        try #require(cached.count == 3)
        #expect(cached[0]["to"] == .string("4711@gcm.googleapis.com"))
        #expect(cached[0]["data"] == .object(["a": .string("x")]))
        #expect(cached[0]["message_id"]?.stringValue?.hasPrefix("up-1-") == true)
        #expect(cached[1] == .object(["to": .string("group-key"), "message_id": .string("mine"), "time_to_live": .int(0)]))
        #expect(cached[2]["to"] == .string("4711@gcm.googleapis.com"))
        #expect(cached[2]["message_id"]?.stringValue?.hasPrefix("up-2-") == true)
        #expect(cached[2]["data"] == nil)
        #expect(lines.all.isEmpty)
    }
}
