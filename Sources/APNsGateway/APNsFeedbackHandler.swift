import CCSEngine
import StoreModel
import Logging
import NIOCore
import NIOSSL
import NIOTLS

/// The feedback service: once the provider's certificate is known, write every tuple of its app in
/// one write, close, and clear the tuples written. The provider sends nothing.
final class APNsFeedbackHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let engine: Engine
    private let logger: Logger

    init(engine: Engine, logger: Logger) {
        self.engine = engine
        self.logger = logger
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case TLSUserEvent.handshakeCompleted? = event as? TLSUserEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        let certificate = try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self).peerCertificate
        guard case .bundleID(let bundleID) = ProviderCertificate.topic(of: certificate) else {
            context.close(promise: nil)
            return
        }
        let channel = context.channel
        let engine = self.engine
        let logger = self.logger
        engine.apnsFeedback(bundleID: bundleID) { result in
            channel.eventLoop.execute {
                let tuples: [APNsFeedbackRecord]
                switch result {
                case .success(let t): tuples = t
                case .failure(let error):
                    logger.error("reading the APNs feedback failed", metadata: ["error": "\(error)"])
                    channel.close(promise: nil)
                    return
                }
                var buffer = channel.allocator.buffer(capacity: tuples.count * 38)
                var encoded: [APNsFeedbackRecord] = []
                for t in tuples {
                    guard let tuple = FeedbackTuple(timestamp: t.timestamp, deviceTokenHex: t.deviceToken) else { continue }
                    tuple.write(to: &buffer)
                    encoded.append(t)
                }
                let written = encoded
                channel.writeAndFlush(buffer).whenComplete { outcome in
                    // Cleared only once handed to the connection: a failed write keeps them for the next read.
                    if case .success = outcome { engine.apnsFeedbackRead(written) }
                    channel.close(promise: nil)
                }
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The provider has nothing to say on this port; whatever it writes is ignored.
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("APNs feedback connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }
}
