import CCSEngine
import StoreModel
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import PushDomain
import Testing
@testable import APNsProviderAPI

/// The stream handler on an `EmbeddedChannel` with a real engine behind it: the answers decided
/// before the engine is asked to deliver (route, authentication, validation, the token's owner,
/// a stopping server), read back as HTTP/2 frames.
@Suite struct ProviderStreamHandlerTests {
    final class Stream {
        let engine: Engine
        let keys: ProviderKeyStore
        /// One connection's shared state; each request gets a stream (a channel) of its own.
        let shared = ProviderConnectionContext(name: "h2-test")
        let services: ProviderServices
        let maker = TokenMaker()

        init() throws {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("apns-h2-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let store = InMemoryStore()
            engine = try Engine(committer: GroupCommitter(store: store), clock: VirtualClock(startMillis: 1_800_000_000_000),
                                configuration: .init())
            keys = ProviderKeyStore(directory: dir.appendingPathComponent("keys").path)
            try keys.register(maker.key)
            services = ProviderServices(engine: engine, keys: keys, logger: Logger(label: "test"))
        }

        deinit { engine.committer.shutdownBlocking() }

        var bearer: String { "bearer " + maker.token(iat: 1_800_000_000) }

        /// Sends one request; returns the answer's status and body.
        func send(method: String = "POST", path: String, headers: [(String, String)], body: String = #"{"aps":{}}"#)
            throws -> (status: String?, body: String?) {
            let channel = EmbeddedChannel()
            try channel.pipeline.syncOperations.addHandler(ProviderStreamHandler(shared: shared, services: services))
            var h = HPACKHeaders([(":method", method), (":scheme", "https"), (":path", path),
                                  (":authority", "api.sandbox.push.apple.com")])
            for (name, value) in headers { h.add(name: name, value: value) }
            try channel.writeInbound(HTTP2Frame.FramePayload.headers(.init(headers: h)))
            try channel.writeInbound(HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(ByteBuffer(string: body)),
                                                                        endStream: true)))
            channel.embeddedEventLoop.run()  // answers given through the engine come back as loop tasks
            var status: String?, text: String?
            while let frame = try channel.readOutbound(as: HTTP2Frame.FramePayload.self) {
                switch frame {
                case .headers(let h): status = h.headers.first(name: ":status")
                case .data(let d): if case .byteBuffer(let b) = d.data { text = String(buffer: b) }
                default: break
                }
            }
            return (status, text)
        }
    }

    static let token = String(repeating: "ab", count: 32)

    @Test func refusedBeforeTheEngine() throws {
        let s = try Stream()
        #expect(try s.send(method: "GET", path: "/3/device/" + Self.token, headers: [])
                == ("405", #"{"reason":"MethodNotAllowed"}"#))
    }

    @Test func missingTokenThenUnknownDevice() throws {
        let s = try Stream()
        #expect(try s.send(path: "/3/device/" + Self.token, headers: [("apns-topic", "com.example.app")])
                == ("403", #"{"reason":"MissingProviderToken"}"#))
        let answer = try s.send(path: "/3/device/" + Self.token,
                                headers: [("authorization", s.bearer), ("apns-topic", "com.example.app")])
        #expect(answer == ("400", #"{"reason":"BadDeviceToken"}"#))
        #expect(s.shared.connection.streamsOpen && s.shared.connection.teamID == "TEAM000001")
    }

    @Test func anotherAppsToken() async throws {
        let s = try Stream()
        let device = try await s.engine.registerDevice(app: "com.example.other", senders: [], platform: .ios, apns: .generate)
        #expect(try s.send(path: "/3/device/" + device.apnsToken!,
                           headers: [("authorization", s.bearer), ("apns-topic", "com.example.app")])
                == ("400", #"{"reason":"DeviceTokenNotForTopic"}"#))
    }

    @Test func aStoppingServerAnswersShutdown() throws {
        let s = try Stream()
        s.shared.shuttingDown = true
        #expect(try s.send(path: "/3/device/" + Self.token, headers: [("authorization", s.bearer)])
                == ("503", #"{"reason":"Shutdown"}"#))
    }
}
