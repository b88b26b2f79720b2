import CCSEngine
import StoreModel
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOTLS
import PushDomain
import Testing
@testable import APNsGateway

/// The gateway handler on an `EmbeddedChannel` with a real engine behind it (no TLS: the handshake
/// event is fired by hand and the topic given).
@Suite struct GatewayHandlerTests {
    final class Gateway {
        let engine: Engine
        let channel = EmbeddedChannel()

        init(topic: GatewayConnection.Topic = .bundleID("com.example.app")) throws {
            let store = InMemoryStore()
            engine = try Engine(committer: GroupCommitter(store: store), clock: VirtualClock(startMillis: 1_700_000_000_000),
                                configuration: .init())
            let handler = APNsGatewayHandler(engine: engine, payloadLimit: 2048, connections: APNsConnections(),
                                             logger: Logger(label: "test"), topic: { _ in topic })
            try channel.pipeline.syncOperations.addHandler(handler)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 2195)).wait()
            channel.pipeline.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: nil))
        }

        deinit { engine.committer.shutdownBlocking() }

        func register(app: String = "com.example.app") async throws -> DeviceRecord {
            try await engine.registerDevice(app: app, senders: [], platform: .ios, apns: .generate)
        }

        /// Writes `bytes`; returns what the gateway wrote back.
        func write(_ bytes: [UInt8]) throws -> [UInt8] {
            try channel.writeInbound(ByteBuffer(bytes: bytes))
            var out: [UInt8] = []
            while var b = try channel.readOutbound(as: ByteBuffer.self) { out += b.readBytes(length: b.readableBytes)! }
            return out
        }
    }

    static func token(_ d: DeviceRecord) -> [UInt8] {
        let hex = Array(d.apnsToken!.utf8)
        return stride(from: 0, to: hex.count, by: 2).map { UInt8(String(decoding: hex[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }

    @Test func firstBadNotificationIsAnsweredThenTheRestIsDropped() async throws {
        let g = try Gateway()
        let device = try await g.register()
        let t = Self.token(device)
        let later: UInt32 = 1_700_086_400  // a day after the virtual clock's start
        let out = try g.write(Frames.frame(id: 1, expiry: later, token: t) + Frames.frame(id: 2, expiry: later, token: t)
                              + Frames.frame(id: 3, token: [UInt8](repeating: 1, count: 32))
                              + Frames.frame(id: 4, expiry: later, token: t))
        #expect(out == [8, 8, 0, 0, 0, 3])
        #expect(!g.channel.isActive)
        await g.engine.sync()
        // Offline: only the most recent notification for the app is kept (2; 4 was dropped unread).
        let queue = try g.engine.queuedMessages(token: device.token)
        #expect(queue.map(\.appMessageID) == ["2"])
        #expect(queue.first?.kind == .apnsNotification)
        #expect(queue.first?.timeToLive == 86_400)
        let counts = g.engine.apnsActivity.counts
        #expect(counts[.accepted] == 2 && counts[.rejected] == 1)
    }

    @Test func anotherAppsTokenIsStatusEight() async throws {
        let g = try Gateway()
        let other = try await g.register(app: "com.example.other")
        #expect(try g.write(Frames.enhanced(id: 9, token: Self.token(other))) == [8, 8, 0, 0, 0, 9])
    }

    @Test func commandZeroFailureClosesWithoutAnswer() async throws {
        let g = try Gateway()
        #expect(try g.write(Frames.simple()) == [])
        #expect(!g.channel.isActive)
    }

    @Test func certificateWithoutTopicIsStatusThree() async throws {
        let g = try Gateway(topic: .missing)
        #expect(try g.write(Frames.frame(id: 5)) == [8, 3, 0, 0, 0, 5])
        let h = try Gateway(topic: .invalidSize)
        #expect(try h.write(Frames.frame(id: 6)) == [8, 6, 0, 0, 0, 6])
    }

    @Test func expiryZeroToAnOfflineDeviceIsNotStored() async throws {
        let g = try Gateway()
        let device = try await g.register()
        #expect(try g.write(Frames.frame(id: 1, expiry: 0, token: Self.token(device))) == [])
        await g.engine.sync()
        #expect(try g.engine.queuedMessages(token: device.token).isEmpty)
    }

    @Test func shutdownReportsTheLastIdentifierTaken() async throws {
        let g = try Gateway()
        let device = try await g.register()
        #expect(try g.write(Frames.frame(id: 41, token: Self.token(device)) + Frames.frame(id: 42, token: Self.token(device))) == [])
        g.channel.pipeline.fireUserInboundEventTriggered(APNsShutdown())
        var out: [UInt8] = []
        while var b = try g.channel.readOutbound(as: ByteBuffer.self) { out += b.readBytes(length: b.readableBytes)! }
        #expect(out == [8, 10, 0, 0, 0, 42])
    }

    @Test func uninstalledAppGivesAFeedbackTupleAndNoError() async throws {
        let g = try Gateway()
        let device = try await g.register()
        try await g.engine.uninstall(token: device.token)
        #expect(try g.write(Frames.frame(id: 1, token: Self.token(device))) == [])
        await g.engine.sync()
        let tuples: [APNsFeedbackRecord] = try await withCheckedThrowingContinuation { c in
            g.engine.apnsFeedback(bundleID: "com.example.app") { c.resume(with: $0) }
        }
        #expect(tuples.map(\.deviceToken) == [device.apnsToken!])
        // Read: cleared. Registered again: never listed.
        g.engine.apnsFeedbackRead(tuples)
        await g.engine.sync()
        let after: [APNsFeedbackRecord] = try await withCheckedThrowingContinuation { c in
            g.engine.apnsFeedback(bundleID: "com.example.app") { c.resume(with: $0) }
        }
        #expect(after.isEmpty)
    }
}
