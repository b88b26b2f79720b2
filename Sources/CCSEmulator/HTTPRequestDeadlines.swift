import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Synchronization

/// Slow clients on the HTTP listeners (slowloris, a chunked body that never ends): a request head
/// must arrive within `timeout` of the connection opening or of the previous response's end, and the
/// whole body within `timeout` of its head; otherwise the connection is closed (docs/hardening.md).
/// Hummingbird adds it after its HTTP decoder, so a head counts once it is complete.
///
/// The deadline is for reading a request, never for writing a response: from a request's end until
/// its response's end (a long answer, an event stream that runs for hours) no deadline runs.
///
/// It also closes a connection whose request was refused with 413 before its body was read (a
/// declared `Content-Length` over the route's limit, `HTTPRequestBody`): the rest of that body is
/// not worth waiting for. The output is closed first, so the client still reads the 413.
final class HTTPRequestDeadlines: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// Connections closed for missing a deadline since the process started.
    static let closed = Atomic<Int>(0)

    let timeout: TimeAmount
    /// When the current request's head or body is due.
    private var due = NIODeadline.distantFuture
    /// One timer per connection, moved forward lazily: a request only sets `due`; the timer, when it
    /// fires early, re-arms itself for the new `due`. (Scheduling and cancelling a task for each head
    /// and end was measured at 4 % of the event loop's time under HTTP load.)
    private var timer: Scheduled<Void>?
    /// Where the connection is in its exchange.
    private var state = ExchangeState()

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
        switch state.read(unwrapInboundIn(data)) {
        case .arm: arm(context)
        case .pause: due = .distantFuture
        case .closeOutput, .none: break  // reading never closes
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let action = state.wrote(unwrapOutboundIn(data))
        switch action {
        case .arm: arm(context)
        case .closeOutput:
            let closed = context.eventLoop.makePromise(of: Void.self)
            context.write(data, promise: promise)
            context.flush()
            // Half-close where the transport can (TCP, TLS); an HTTP/2 stream cannot, so it is reset.
            closed.futureResult.whenFailure { [channel = context.channel] _ in channel.close(promise: nil) }
            context.close(mode: .output, promise: closed)
            arm(context)
            return
        case .pause, .none: break
        }
        context.write(data, promise: promise)
    }

    private func arm(_ context: ChannelHandlerContext) {
        due = context.eventLoop.now + timeout
        if timer == nil { schedule(context) }
    }

    private func schedule(_ context: ChannelHandlerContext) {
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [self] in
            timer = nil
            if due == .distantFuture { return }  // a response is being written; its end re-arms
            if context.eventLoop.now >= due {
                Self.close(context.channel)
            } else {
                schedule(context)
            }
        }
    }
}

/// The part of an HTTP/1.1 exchange that decides the deadline: whether a request is being read, and
/// whether a response is being written (a value, tested on its own).
struct ExchangeState: Equatable {
    /// Requests whose head came and whose response has not ended.
    private(set) var awaitingResponse = 0
    /// The current request's body is still coming.
    private(set) var readingBody = false
    /// The response being written is a 413.
    private var refusingTooLarge = false

    enum Action: Equatable { case arm, pause, closeOutput, none }

    mutating func read(_ part: HTTPRequestPart) -> Action {
        switch part {
        case .head:
            awaitingResponse += 1
            readingBody = true
            return .arm  // the body is due
        case .body:
            return .none
        case .end:
            readingBody = false
            // The request is read: until its response ends, nothing is due from the client.
            return awaitingResponse > 0 ? .pause : .arm
        }
    }

    mutating func wrote(_ part: HTTPResponsePart) -> Action {
        switch part {
        case .head(let head):
            // 1xx heads (100-continue) are not the response.
            if head.status.kind != .informational { refusingTooLarge = head.status == .contentTooLarge }
            return .none
        case .body:
            return .none
        case .end:
            awaitingResponse = max(0, awaitingResponse - 1)
            if refusingTooLarge && readingBody { refusingTooLarge = false; return .closeOutput }
            refusingTooLarge = false
            // The next head is due now, or the rest of a body still being read.
            return .arm
        }
    }
}
