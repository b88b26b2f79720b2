import NIOCore

/// One half of a byte relay between two channels (the "glue" of swift-nio's proxy example):
/// what one channel reads, its partner writes. Backpressure: a side stops reading while its
/// partner cannot take more. Either side closing closes the other.
///
/// Both halves must live on the same event loop (the proxy opens the upstream connection on the
/// client's loop), so they call each other directly.
final class RelayHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var partner: RelayHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false

    private init() {}

    static func matchedPair() -> (RelayHandler, RelayHandler) {
        let first = RelayHandler(), second = RelayHandler()
        first.partner = second
        second.partner = first
        return (first, second)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
    }

    private func write(_ bytes: ByteBuffer) {
        guard let context else { return }
        context.write(wrapOutboundOut(bytes), promise: nil)
    }

    private var isWritable: Bool { context?.channel.isWritable ?? false }

    private func partnerBecameWritable() {
        if pendingRead, partner?.isWritable ?? false {
            pendingRead = false
            context?.read()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        partner?.write(unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        partner?.context?.flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner?.context?.close(promise: nil)
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Half-close: the client finished sending; pass the end of input on.
        if let event = event as? ChannelEvent, case .inputClosed = event {
            partner?.context?.close(mode: .output, promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        partner?.partnerBecameWritable()
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if partner?.isWritable ?? true {
            context.read()
        } else {
            pendingRead = true
        }
    }
}
