import NIOCore
import NIOTLS
import Synchronization

/// Closes a connection whose TLS handshake has not finished in time, so that half-open handshakes
/// (a peer that connects and stalls) cannot pile up (docs/hardening.md); removes itself once the
/// handshake is done.
final class HandshakeDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    static let closed = Atomic<Int>(0)

    let timeout: TimeAmount
    private var deadline: Scheduled<Void>?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: timeout) {
            Self.closed.add(1, ordering: .relaxed)
            channel.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        context.fireUserInboundEventTriggered(event)
        if case .handshakeCompleted? = event as? TLSUserEvent {
            deadline?.cancel()
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
        }
    }
}
