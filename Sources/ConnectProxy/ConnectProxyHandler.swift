import Logging
import NIOCore
import NIOPosix

/// The proxy port's channel handler: a thin adapter that feeds `ConnectTunnel` and carries out
/// its actions. Once the tunnel is open it hands the connection to a `RelayHandler` pair and
/// removes itself.
final class ConnectProxyHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var tunnel: ConnectTunnel
    private let routes: [ConnectDestination: SocketAddress]
    private let logger: Logger
    private var headTimeout: Scheduled<Void>?
    /// A client that has not finished its CONNECT head by then is closed (a slow-loris guard).
    static let headTimeout: TimeAmount = .seconds(30)

    init(routes: [ConnectDestination: SocketAddress], credentials: ProxyCredentials? = nil, logger: Logger) {
        self.routes = routes
        self.tunnel = ConnectTunnel(allowed: Set(routes.keys), credentials: credentials)
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        headTimeout = context.eventLoop.scheduleTask(in: Self.headTimeout) { channel.close(promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        headTimeout?.cancel()
        tunnel.closed()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch tunnel.read(unwrapInboundIn(data)) {
        case .wait, .hold, .drop:
            break
        case .forward(let bytes):
            // Only between the relay being set up and this handler's removal.
            context.fireChannelRead(wrapInboundOut(bytes))
        case .refuse(let refusal):
            refuse(refusal, context: context)
        case .connect(let destination):
            headTimeout?.cancel()
            guard let address = routes[destination] else { return } // the tunnel only names routed destinations
            connect(to: address, destination: destination, context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("proxy connection error: \(error)")
        context.close(promise: nil)
    }

    private func refuse(_ refusal: ConnectRefusal, context: ChannelHandlerContext) {
        headTimeout?.cancel()
        logger.notice("proxy: refused with \(refusal.status): \(refusal.text)")
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: refusal.response))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    private func connect(to address: SocketAddress, destination: ConnectDestination, context: ChannelHandlerContext) {
        let client = context.channel
        // Nothing more is read from the client until the upstream is open (what was read is held).
        client.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
        ClientBootstrap(group: context.eventLoop)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .connect(to: address)
            .assumeIsolated()
            .whenComplete { [self] result in
                switch result {
                case .failure(let error):
                    if let refusal = tunnel.upstreamFailed("\(error)") { refuse(refusal, context: context) }
                case .success(let upstream):
                    open(upstream: upstream, destination: destination, context: context)
                }
            }
    }

    private func open(upstream: any Channel, destination: ConnectDestination, context: ChannelHandlerContext) {
        let client = context.channel
        guard client.isActive else {
            upstream.close(promise: nil)
            return
        }
        let pending = tunnel.upstreamConnected()
        logger.debug("proxy: tunnel to \(destination) open")
        let (toUpstream, toClient) = RelayHandler.matchedPair()
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: ConnectTunnel.established)), promise: nil)
        do {
            // Both channels are on this event loop (the upstream was opened on it).
            try client.pipeline.syncOperations.addHandler(toUpstream)
            try upstream.pipeline.syncOperations.addHandler(toClient)
        } catch {
            upstream.close(promise: nil)
            client.close(promise: nil)
            return
        }
        for bytes in pending { context.fireChannelRead(wrapInboundOut(bytes)) }
        context.pipeline.syncOperations.removeHandler(self, promise: nil)
        client.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
    }
}
