import NIOCore
import NIOTLS
import Synchronization

/// Closes a connection whose TLS handshake has not finished in time, so that half-open handshakes
/// (a peer that connects and stalls) cannot pile up (docs/hardening.md); removes itself once the
/// handshake is done.
public final class HandshakeDeadline: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = NIOAny

    static let closed = Atomic<Int>(0)

    let timeout: TimeAmount
    private var deadline: Scheduled<Void>?

    public init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: timeout) {
            Self.closed.add(1, ordering: .relaxed)
            channel.close(promise: nil)
        }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        context.fireUserInboundEventTriggered(event)
        if case .handshakeCompleted? = event as? TLSUserEvent {
            deadline?.cancel()
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
        }
    }
}
