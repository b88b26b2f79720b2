import CCSEngine
import Locking
import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// The open gateway connections, so that a stopping server can tell each one (status 10).
final class APNsConnections: Sendable {
    private let channels = Locked<[ObjectIdentifier: any Channel]>([:])

    func add(_ channel: any Channel) { channels.withLock { $0[ObjectIdentifier(channel)] = channel } }
    func remove(_ channel: any Channel) { channels.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(channel)) } }
    var all: [any Channel] { channels.withLock { Array($0.values) } }
}

/// The gateway (2195) and feedback (2196) listeners: TLS that requires a client certificate issued by
/// the trusted CA; TLS 1.2 at most, as Apple's gateway spoke it.
public final class APNsServer: Sendable {
    public struct Configuration: Sendable {
        public var host = "127.0.0.1"
        public var gatewayPort = 2195
        public var feedbackPort = 2196
        /// 2048 bytes (iOS 8 on); 256 for the original limit.
        public var payloadLimit = 2048
        /// Accept TLS 1.0 and 1.1 too, for very old provider libraries.
        public var allowTLS1 = false
        /// A TLS handshake not finished by then is abandoned (the connection is closed).
        public var handshakeTimeout: TimeAmount = .seconds(30)

        public init() {}
    }

    public let gateway: any Channel
    public let feedback: any Channel
    private let connections: APNsConnections

    private init(gateway: any Channel, feedback: any Channel, connections: APNsConnections) {
        self.gateway = gateway
        self.feedback = feedback
        self.connections = connections
    }

    public var gatewayPort: Int { gateway.localAddress?.port ?? 0 }
    public var feedbackPort: Int { feedback.localAddress?.port ?? 0 }

    /// The server side of the provider TLS: `certificateChain`/`privateKey` are the emulator's server
    /// certificate, `trustRoots` the CA whose client certificates are accepted.
    public static func tlsConfiguration(certificateChain: [NIOSSLCertificate], privateKey: NIOSSLPrivateKey,
                                        trustRoots: [NIOSSLCertificate], allowTLS1: Bool) -> TLSConfiguration {
        var c = TLSConfiguration.makeServerConfiguration(certificateChain: certificateChain.map { .certificate($0) },
                                                         privateKey: .privateKey(privateKey))
        // A client certificate chained to the CA, or no handshake. No host name: it names an app.
        c.certificateVerification = .noHostnameVerification
        c.trustRoots = .certificates(trustRoots)
        // TLS 1.3 sends session tickets after the handshake, which a non-blocking provider library
        // (pushjack) reads as data; Apple's gateway never spoke 1.3 (spec fcm-http §7).
        c.maximumTLSVersion = .tlsv12
        c.minimumTLSVersion = allowTLS1 ? .tlsv1 : .tlsv12
        c.shutdownTimeout = .seconds(1)
        return c
    }

    /// The TLS of both listeners: a context of its own for every connection, so that no connection
    /// can resume another's session. Apple's gateway and feedback service made a full handshake each
    /// time; a BoringSSL context issues session tickets and caches session ids for all its
    /// connections, and swift-nio-ssl offers no switch for either, but a ticket or id made by one
    /// context means nothing to another. (Making a context from parsed certificates costs far less than
    /// the handshake it goes with.)
    public struct TLS: Sendable {
        let configuration: TLSConfiguration

        /// Checks the configuration once, so a bad certificate or key fails the start, not a connection.
        public init(configuration: TLSConfiguration) throws {
            _ = try NIOSSLContext(configuration: configuration)
            self.configuration = configuration
        }

        func connectionContext() throws -> NIOSSLContext { try NIOSSLContext(configuration: configuration) }
    }

    /// Binds the gateway listener; the feedback listener follows with `start(feedbackOn:)`, so that a
    /// failure names the option whose port could not be bound.
    public static func bindGateway(group: any EventLoopGroup, tls: TLS, configuration: Configuration,
                                   engine: Engine, logger: Logger) async throws -> PendingGateway {
        let connections = APNsConnections()
        let limit = configuration.payloadLimit
        let channel = try await bootstrap(group: group, tls: tls, handshakeTimeout: configuration.handshakeTimeout) { channel in
            APNsGatewayHandler(engine: engine, payloadLimit: limit, connections: connections, logger: logger)
        }
        .bind(host: configuration.host, port: configuration.gatewayPort).get()
        return PendingGateway(channel: channel, connections: connections)
    }

    public struct PendingGateway: Sendable {
        public let channel: any Channel
        let connections: APNsConnections

        public func start(group: any EventLoopGroup, tls: TLS, configuration: Configuration,
                          engine: Engine, logger: Logger) async throws -> APNsServer {
            let feedback = try await APNsServer.bootstrap(group: group, tls: tls, handshakeTimeout: configuration.handshakeTimeout) { _ in
                APNsFeedbackHandler(engine: engine, logger: logger)
            }
            .bind(host: configuration.host, port: configuration.feedbackPort).get()
            return APNsServer(gateway: channel, feedback: feedback, connections: connections)
        }
    }

    private static func bootstrap(group: any EventLoopGroup, tls: TLS, handshakeTimeout: TimeAmount,
                                  handler: @escaping @Sendable (any Channel) -> any ChannelHandler) -> ServerBootstrap {
        ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls.connectionContext()))
                    try channel.pipeline.syncOperations.addHandler(HandshakeDeadline(timeout: handshakeTimeout))
                    try channel.pipeline.syncOperations.addHandler(handler(channel))
                }
            }
    }

    /// Stops both listeners; every open gateway connection gets status 10 with the identifier of the
    /// last notification it took, then closes.
    public func shutdown() async {
        try? await gateway.close()
        try? await feedback.close()
        for channel in connections.all {
            channel.pipeline.fireUserInboundEventTriggered(APNsShutdown())
            try? await channel.closeFuture.get()
        }
    }
}
