import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Synchronization

/// Slow clients on the HTTP listeners (slowloris, a chunked body that never ends): a request head
/// must arrive within `timeout` of the connection opening or of the previous request's end, and the
/// whole body within `timeout` of its head; otherwise the connection is closed (docs/hardening.md).
/// Hummingbird adds it after its HTTP decoder, so a head counts once it is complete.
final class HTTPRequestDeadlines: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    /// Connections closed for missing a deadline since the process started.
    static let closed = Atomic<Int>(0)

    let timeout: TimeAmount
    private var deadline: Scheduled<Void>?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        arm(context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head, .end: arm(context)  // now the body is due; or the next request's head
        case .body: break
        }
        context.fireChannelRead(data)
    }

    private func arm(_ context: ChannelHandlerContext) {
        deadline?.cancel()
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: timeout) {
            Self.closed.add(1, ordering: .relaxed)
            channel.close(promise: nil)
        }
    }
}
