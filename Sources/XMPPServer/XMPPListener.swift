import CCSEngine
import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// A TLS listener (direct TLS from the first byte, TLS 1.2 and later) for one role.
public enum XMPPListener {
    /// How many times an idle connection has freed its XML parser (process-wide).
    public static var idleParsersReleased: Int { XMPPConnectionHandler.parsersReleased.load(ordering: .relaxed) }

    public static func bind(group: any EventLoopGroup, host: String, port: Int, tls: NIOSSLContext,
                            role: ConnectionRole, engine: Engine, configuration: XMPPServerConfiguration,
                            logger: Logger, mailboxes: LoopMailboxes? = nil) async throws -> any Channel {
        let mailboxes = mailboxes ?? LoopMailboxes(group: group)
        return try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 1024)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            // Reads start small (an idle device's traffic is a TLS record of ~100 bytes) and grow
            // with the traffic: the buffer a connection keeps between reads is its own memory.
            .childChannelOption(ChannelOptions.recvAllocator,
                                value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65536))
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // NIOSSL allocates its two per-connection buffers when its handler is added, from
                    // the channel's allocator: for that moment only, the allocator that gives them
                    // pages of their own (see PageBackedAllocator); every other buffer, reads
                    // included, comes from the heap as before.
                    let options = channel.syncOptions
                    let own = try options?.getOption(ChannelOptions.allocator)
                    try options?.setOption(ChannelOptions.allocator, value: PageBackedAllocator.allocator)
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                    if let own { try options?.setOption(ChannelOptions.allocator, value: own) }
                    try channel.pipeline.syncOperations.addHandler(
                        XMPPConnectionHandler(role: role, engine: engine, configuration: configuration, logger: logger,
                                              mailbox: mailboxes.mailbox(for: channel.eventLoop)))
                }
            }
            .bind(host: host, port: port)
            .get()
    }
}
