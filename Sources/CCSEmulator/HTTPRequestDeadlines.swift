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
    /// When the current request's head or body is due.
    private var due = NIODeadline.distantFuture
    /// One timer per connection, moved forward lazily: a request only sets `due`; the timer, when it
    /// fires early, re-arms itself for the new `due`. (Scheduling and cancelling a task for each head
    /// and end was measured at 4 % of the event loop's time under HTTP load.)
    private var timer: Scheduled<Void>?

    /// Closes a connection (or HTTP/2 stream) that missed a deadline, counted in `closed`.
    static func close(_ channel: any Channel) {
        closed.add(1, ordering: .relaxed)
        channel.close(promise: nil)
    }

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        arm(context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
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
        due = .now() + timeout
        if timer == nil { schedule(context) }
    }

    private func schedule(_ context: ChannelHandlerContext) {
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [self] in
            timer = nil
            if NIODeadline.now() >= due {
                Self.close(context.channel)
            } else {
                schedule(context)
            }
        }
    }
}
