import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// One APNs provider connection for `bench apns`: TLS with a provider certificate, then command-2
/// frames written as fast as the socket takes them (or at a fixed rate), each payload carrying its
/// write time so the device side can measure provider write → device.
public final class APNsProviderConnection: Sendable {
    public struct Plan: Sendable {
        /// 32-byte device tokens to cycle through.
        public var tokens: [[UInt8]]
        /// Notifications this connection sends in total.
        public var count: Int
        /// Per second for this connection; nil: as fast as the socket takes them.
        public var rate: Double?
        /// Notifications per write.
        public var batch = 64

        public init(tokens: [[UInt8]], count: Int, rate: Double?) {
            self.tokens = tokens
            self.count = count
            self.rate = rate
        }
    }

    /// What the writer did, readable from any thread.
    public final class Progress: Sendable {
        public let sent = Atomic<Int>(0)
        /// An error response or a close before the end: the gateway refused something.
        public let refused = Atomic<Bool>(false)
    }

    public let progress: Progress
    private let done: EventLoopPromise<Void>
    private let channel: any Channel

    private init(channel: any Channel, done: EventLoopPromise<Void>, progress: Progress) {
        self.channel = channel
        self.done = done
        self.progress = progress
    }

    public static func connect(host: String, port: Int, certificatePath: String, keyPath: String, plan: Plan,
                               group: any EventLoopGroup) async throws -> APNsProviderConnection {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none  // as provider libraries did: the gateway is not verified
        tls.maximumTLSVersion = .tlsv12
        tls.certificateChain = try NIOSSLCertificate.fromPEMFile(certificatePath).map { .certificate($0) }
        tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: keyPath, format: .pem))
        let context = try NIOSSLContext(configuration: tls)
        let loop = group.next()
        let done = loop.makePromise(of: Void.self)
        let progress = Progress()
        let channel = try await ClientBootstrap(group: loop)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: context, serverHostname: nil))
                    try channel.pipeline.syncOperations.addHandler(Writer(plan: plan, done: done, progress: progress))
                }
            }
            .connect(host: host, port: port).get()
        return APNsProviderConnection(channel: channel, done: done, progress: progress)
    }

    /// Completes when every notification is written (or the gateway refused one).
    public func finished() async throws { try await done.futureResult.get() }

    public func close() async { try? await channel.close() }

    /// A command-2 frame: token, payload, identifier, expiry, priority.
    static func frame(token: [UInt8], payload: [UInt8], identifier: UInt32, into buffer: inout ByteBuffer) {
        let length = 3 + token.count + 3 + payload.count + 7 + 7 + 4
        buffer.writeInteger(UInt8(2))
        buffer.writeInteger(UInt32(length))
        buffer.writeInteger(UInt8(1)); buffer.writeInteger(UInt16(token.count)); buffer.writeBytes(token)
        buffer.writeInteger(UInt8(2)); buffer.writeInteger(UInt16(payload.count)); buffer.writeBytes(payload)
        buffer.writeInteger(UInt8(3)); buffer.writeInteger(UInt16(4)); buffer.writeInteger(identifier)
        // An hour ahead: stored if a device is offline (none is in the bench).
        buffer.writeInteger(UInt8(4)); buffer.writeInteger(UInt16(4)); buffer.writeInteger(UInt32(Date().timeIntervalSince1970) + 3600)
        buffer.writeInteger(UInt8(5)); buffer.writeInteger(UInt16(1)); buffer.writeInteger(UInt8(10))
    }

    final class Writer: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        let plan: Plan
        let done: EventLoopPromise<Void>
        let progress: Progress
        var next = 0
        var ready = false
        var paced: RepeatedTask?
        var allowance = 0.0

        init(plan: Plan, done: EventLoopPromise<Void>, progress: Progress) {
            self.plan = plan
            self.done = done
            self.progress = progress
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case TLSUserEvent.handshakeCompleted? = event as? TLSUserEvent {
                ready = true
                if let rate = plan.rate {
                    let tick = TimeAmount.milliseconds(5)
                    let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
                    let contextBound = NIOLoopBound(context, eventLoop: context.eventLoop)
                    paced = context.eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: tick) { _ in
                        let writer = loopBound.value
                        writer.allowance += rate * 0.005
                        let n = Int(writer.allowance)
                        writer.allowance -= Double(n)
                        writer.write(upTo: n, context: contextBound.value)
                    }
                } else {
                    pump(context: context)
                }
            }
            context.fireUserInboundEventTriggered(event)
        }

        func channelWritabilityChanged(context: ChannelHandlerContext) {
            if plan.rate == nil { pump(context: context) }
            context.fireChannelWritabilityChanged()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            // The gateway answers only a bad notification.
            progress.refused.store(true, ordering: .relaxed)
            finish(context: context)
        }

        func channelInactive(context: ChannelHandlerContext) {
            if next < plan.count { progress.refused.store(true, ordering: .relaxed) }
            finish(context: context)
        }

        private var completed = false

        private func finish(context: ChannelHandlerContext) {
            paced?.cancel()
            paced = nil
            if !completed {
                completed = true
                done.succeed(())
            }
        }

        private func pump(context: ChannelHandlerContext) {
            while ready && next < plan.count && context.channel.isWritable {
                write(upTo: plan.batch, context: context)
            }
        }

        private func write(upTo n: Int, context: ChannelHandlerContext) {
            let count = min(n, plan.count - next)
            guard count > 0 else { return }
            var buffer = context.channel.allocator.buffer(capacity: count * 140)
            for _ in 0..<count {
                let t = DispatchTime.now().uptimeNanoseconds
                let payload = Array(#"{"aps":{"alert":"bench"},"t":\#(t)}"#.utf8)
                APNsProviderConnection.frame(token: plan.tokens[next % plan.tokens.count], payload: payload,
                                             identifier: UInt32(truncatingIfNeeded: next), into: &buffer)
                next += 1
            }
            progress.sent.add(count, ordering: .relaxed)
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
            if next >= plan.count {
                paced?.cancel()
                paced = nil
                let writer = NIOLoopBound(self, eventLoop: context.eventLoop)
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.channel.writeAndFlush(context.channel.allocator.buffer(capacity: 0)).whenComplete { _ in
                    writer.value.finish(context: bound.value)
                }
            }
        }
    }
}
