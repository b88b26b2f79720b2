import CCSEngine
import FaultInjection
import Logging
import NIOCore
import NIOSSL
import NIOTLS
import PushDomain

/// The thin NIO side of one gateway connection: bytes into `GatewayConnection`, its steps out to the
/// engine and the wire.
final class APNsGatewayHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let engine: Engine
    private let payloadLimit: Int
    private let connections: APNsConnections
    private let logger: Logger
    /// nil until the TLS handshake has shown the provider certificate.
    private var connection: GatewayConnection?
    /// Reads the topic once the handshake is done: from the TLS handler's peer certificate (tests
    /// without TLS give their own).
    private let topic: (ChannelHandlerContext) -> GatewayConnection.Topic

    init(engine: Engine, payloadLimit: Int, connections: APNsConnections, logger: Logger,
         topic: @escaping (ChannelHandlerContext) -> GatewayConnection.Topic = APNsGatewayHandler.peerTopic) {
        self.topic = topic
        self.engine = engine
        self.payloadLimit = payloadLimit
        self.connections = connections
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connections.add(context.channel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        connections.remove(context.channel)
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event as? TLSUserEvent ?? .shutdownCompleted {
            connection = GatewayConnection(topic: topic(context), payloadLimit: payloadLimit)
        } else if event is APNsShutdown {
            if let packet = connection?.shutdown() {
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: packet)), promise: nil)
            }
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    static func peerTopic(_ context: ChannelHandlerContext) -> GatewayConnection.Topic {
        ProviderCertificate.topic(of: try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self).peerCertificate)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard var current = connection else { return }
        let bytes = unwrapInboundIn(data)
        let engine = self.engine
        let step = current.received(bytes) { n, bundleID in
            // An injected `apns_error` refuses the notification as the real gateway would (docs/conformance.md).
            for action in engine.intercept(.apnsNotification, FaultSubject(
                sender: bundleID, token: n.deviceTokenHex, messageID: String(n.identifier), origin: "apns")) {
                if case .apnsError(let status, _) = action { return APNsStatus(rawValue: status) ?? .unknown }
            }
            switch engine.apnsRecipient(deviceToken: n.deviceTokenHex, bundleID: bundleID) {
            case .installed, .uninstalled: return nil
            case .unknown, .otherApp: return .invalidToken
            }
        }
        connection = current
        guard case .bundleID(let bundleID) = current.topic else {
            if let rejection = step.rejection { reject(rejection, bundleID: "", context: context) }
            return
        }
        if !step.accepted.isEmpty {
            let now = engine.clock.nowMillis()
            let loop = context.eventLoop
            let channel = context.channel
            let handler = NIOLoopBound(self, eventLoop: loop)
            for n in step.accepted {
                engine.report(apns: .init(event: .accepted, at: now, bundleID: bundleID,
                                                 deviceToken: n.deviceTokenHex, identifier: n.identifier,
                                                 command: n.command.rawValue, priority: n.priority, expiry: n.expiry,
                                                 payload: n.payload))
                let identifier = n.identifier
                let request = SendRequest(sender: bundleID, target: .apnsDeviceToken(n.deviceTokenHex),
                                          message: n.message(nowMillis: now),
                                          origin: SendOrigin(api: .apns,
                                                             clientMessageID: String(identifier)))
                engine.send(request) { [engine] results in
                    engine.recordAnswers(request, results) { _ in "APNs status 1 (processing error)" }
                    // Only the store failing is a refusal the provider can act on (retry): status 1.
                    guard case .refused(.unavailable)? = results.first else { return }
                    loop.execute { handler.value.processingError(identifier: identifier, channel: channel) }
                }
            }
        }
        if let rejection = step.rejection { reject(rejection, bundleID: bundleID, context: context) }
    }

    private func reject(_ r: APNsRejection, bundleID: String, context: ChannelHandlerContext) {
        engine.report(apns: .init(event: .rejected, at: engine.clock.nowMillis(), bundleID: bundleID,
                                         deviceToken: APNsNotification.hex(r.deviceToken), identifier: r.identifier,
                                         command: r.commandByte, status: r.status.rawValue))
        if r.sendsErrorResponse {
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: r.status.errorResponse(identifier: r.identifier))),
                                  promise: nil)
        }
        context.close(promise: nil)
    }

    private func processingError(identifier: UInt32, channel: any Channel) {
        guard var current = connection, !current.isClosed else { return }
        _ = current.shutdown()  // closed: later bytes are dropped
        connection = current
        logger.warning("APNs notification not stored", metadata: ["identifier": "\(identifier)"])
        channel.writeAndFlush(ByteBuffer(bytes: APNsStatus.processingError.errorResponse(identifier: identifier)), promise: nil)
        channel.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A refused handshake (no or a foreign client certificate) or a reset: nothing to answer.
        logger.debug("APNs gateway connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }
}

/// Fired on each open gateway connection when the server stops: status 10, then close.
struct APNsShutdown: Sendable {}
