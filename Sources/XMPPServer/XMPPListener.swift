import CCSEngine
import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// A TLS listener (direct TLS from the first byte, TLS 1.2 and later) for one role.
public enum XMPPListener {
    public static func bind(group: any EventLoopGroup, host: String, port: Int, tls: NIOSSLContext,
                            role: ConnectionRole, engine: Engine, configuration: XMPPServerConfiguration,
                            logger: Logger, mailboxes: LoopMailboxes? = nil) async throws -> any Channel {
        let mailboxes = mailboxes ?? LoopMailboxes(group: group)
        return try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 1024)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                    try channel.pipeline.syncOperations.addHandler(
                        XMPPConnectionHandler(role: role, engine: engine, configuration: configuration, logger: logger,
                                              mailbox: mailboxes.mailbox(for: channel.eventLoop)))
                }
            }
            .bind(host: host, port: port)
            .get()
    }
}
