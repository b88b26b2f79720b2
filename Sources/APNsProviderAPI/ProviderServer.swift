import APNsGateway
import CCSEngine
import Logging
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL

/// The HTTP/2 provider API listener (`serve --apns-http2-port`, Apple's port 2197 or 443): TLS 1.2+
/// with ALPN `h2`; a client certificate from the CA is optional (certificate auth), without one the
/// connection uses provider tokens.
public final class ProviderServer: Sendable {
    public struct Configuration: Sendable {
        public var host = "127.0.0.1"
        public var port = 2197
        /// A TLS handshake not finished by then is abandoned.
        public var handshakeTimeout: TimeAmount = .seconds(30)
        /// How long a stopping server lets streams in flight finish after its GOAWAY.
        public var shutdownGrace: TimeAmount = .seconds(1)

        public init() {}
    }

    public let channel: any Channel
    private let connections: ProviderConnections
    private let shutdownGrace: TimeAmount

    private init(channel: any Channel, connections: ProviderConnections, shutdownGrace: TimeAmount) {
        self.channel = channel
        self.connections = connections
        self.shutdownGrace = shutdownGrace
    }

    public var port: Int { channel.localAddress?.port ?? 0 }

    /// `certificateChain`/`privateKey`: the server certificate; `trustRoots`: the CA whose provider
    /// certificates are accepted when a client presents one.
    public static func tlsConfiguration(certificateChain: [NIOSSLCertificate], privateKey: NIOSSLPrivateKey,
                                        trustRoots: [NIOSSLCertificate]) -> TLSConfiguration {
        var c = TLSConfiguration.makeServerConfiguration(certificateChain: certificateChain.map { .certificate($0) },
                                                         privateKey: .privateKey(privateKey))
        c.certificateVerification = .optionalVerification
        c.trustRoots = .certificates(trustRoots)
        c.minimumTLSVersion = .tlsv12
        c.applicationProtocols = ["h2"]
        c.shutdownTimeout = .seconds(1)
        return c
    }

    public static func bind(group: any EventLoopGroup, tls: TLSConfiguration, configuration: Configuration,
                            engine: Engine, keys: ProviderKeyStore, logger: Logger) async throws -> ProviderServer {
        let context = try NIOSSLContext(configuration: tls)
        let connections = ProviderConnections()
        let services = ProviderServices(engine: engine, keys: keys, logger: logger)
        let timeout = configuration.handshakeTimeout
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try configure(channel, context: context, timeout: timeout, connections: connections, services: services)
                }
            }
            .bind(host: configuration.host, port: configuration.port).get()
        return ProviderServer(channel: channel, connections: connections, shutdownGrace: configuration.shutdownGrace)
    }

    private static func configure(_ channel: any Channel, context: NIOSSLContext, timeout: TimeAmount,
                                  connections: ProviderConnections, services: ProviderServices) throws {
        let shared = ProviderConnectionContext(name: connections.nextName())
        let sync = channel.pipeline.syncOperations
        try sync.addHandler(NIOSSLServerHandler(context: context))
        try sync.addHandler(HandshakeDeadline(timeout: timeout))
        try sync.addHandler(ProviderConnectionHandler(shared: shared, connections: connections))
        var settings = NIOHTTP2Handler.ConnectionConfiguration()
        // One stream until a provider token verified, as APNs does (certificates: all at once).
        settings.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: ProviderConnection.initialConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16_384),
        ]
        let bound = NIOLoopBound(shared, eventLoop: channel.eventLoop)
        _ = try sync.configureHTTP2Pipeline(mode: .server, connectionConfiguration: settings,
                                            streamConfiguration: .init()) { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(ProviderStreamHandler(shared: bound.value, services: services))
            }
        }
    }

    /// Stops listening; each open connection answers 503 `Shutdown` to what it still gets for the
    /// grace period, then sends GOAWAY and closes.
    public func shutdown() async {
        try? await channel.close()
        let open = connections.all
        for connection in open {
            connection.pipeline.fireUserInboundEventTriggered(ProviderShutdown())
        }
        let grace = shutdownGrace
        for connection in open {
            connection.eventLoop.scheduleTask(in: grace) {
                connection.pipeline.fireUserInboundEventTriggered(ProviderGoAway())
            }
        }
        for connection in open { try? await connection.closeFuture.get() }
    }
}
