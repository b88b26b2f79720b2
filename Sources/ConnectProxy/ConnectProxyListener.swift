import Logging
import NIOCore
import NIOPosix

/// Proxy mode (`--proxy-port`): an HTTP CONNECT listener that tunnels only to the Google and APNs hosts
/// the emulator plays, each to the emulator's own listener for it (docs/http-api.md#proxy-mode).
/// The emulator's listener terminates TLS with a development-CA certificate for that host name,
/// so a client that trusts the CA and sets `HTTPS_PROXY` reaches the emulator unchanged.
///
/// Why a relay to the listener rather than TLS inside this channel: the HTTPS listener
/// (Hummingbird) and the CCS listener own their connections' pipelines; relaying the tunnelled
/// bytes hands the client's TLS stream to exactly the pipeline a direct connection gets, so there
/// is one TLS termination and one HTTP stack per protocol.
public enum ConnectProxyListener {
    public static func bind(group: any EventLoopGroup, host: String, port: Int,
                            routes: [ConnectDestination: SocketAddress], credentials: ProxyCredentials? = nil,
                            logger: Logger) async throws -> any Channel {
        try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            // Half-close passes through the tunnel (a client may shut its write side first).
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ConnectProxyHandler(routes: routes, credentials: credentials, logger: logger))
                }
            }
            .bind(host: host, port: port)
            .get()
    }
}
