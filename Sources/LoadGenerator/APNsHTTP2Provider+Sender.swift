import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOTLS

extension APNsHTTP2Provider {
    /// Sits after the HTTP/2 handler on the connection: opens a stream per notification while the
    /// window (and the server's SETTINGS) allow, counts the answers, paces an open loop.
    final class Sender: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame

        let plan: Plan
        let multiplexer: NIOHTTP2Handler.StreamMultiplexer
        let loop: any EventLoop
        let done: EventLoopPromise<Void>
        let progress: Progress
        var next = 0
        var answered = 0
        var inFlight = 0
        /// One until the first answer: the server's first SETTINGS allow one stream before a token verified.
        var window = 1
        var ready = false
        var allowance = 0.0
        var paced: RepeatedTask?

        init(plan: Plan, multiplexer: NIOHTTP2Handler.StreamMultiplexer, loop: any EventLoop, done: EventLoopPromise<Void>,
             progress: Progress) {
            self.plan = plan
            self.multiplexer = multiplexer
            self.loop = loop
            self.done = done
            self.progress = progress
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case TLSUserEvent.handshakeCompleted? = event as? TLSUserEvent {
                ready = true
                if let rate = plan.rate {
                    let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
                    paced = context.eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: .milliseconds(5)) { _ in
                        let sender = bound.value
                        sender.allowance += rate * 0.005
                        let n = Int(sender.allowance)
                        sender.allowance -= Double(n)
                        sender.open(upTo: n)
                    }
                } else {
                    open(upTo: Int.max)
                }
            }
            context.fireUserInboundEventTriggered(event)
        }

        func channelInactive(context: ChannelHandlerContext) {
            paced?.cancel()
            done.succeed(())
        }

        /// Opens streams up to `n` more notifications, within the window.
        func open(upTo n: Int) {
            var opened = 0
            while ready && next < plan.count && inFlight < window && opened < n {
                send(index: next)
                next += 1
                inFlight += 1
                opened += 1
            }
        }

        private func send(index: Int) {
            let t = DispatchTime.now().uptimeNanoseconds
            var headers = HPACKHeaders([(":method", "POST"), (":scheme", "https"), (":authority", "localhost"),
                                        (":path", "/3/device/" + plan.tokens[index % plan.tokens.count])])
            headers.add(name: "authorization", value: plan.authorization)
            headers.add(name: "apns-topic", value: plan.topic)
            headers.add(name: "apns-push-type", value: "alert")
            let payload = ByteBuffer(string: #"{"aps":{"alert":"bench"},"t":\#(t)}"#)
            progress.sent.add(1, ordering: .relaxed)
            let sender = NIOLoopBound(self, eventLoop: loop)
            multiplexer.createStreamChannel { stream in
                stream.eventLoop.makeCompletedFuture {
                    try stream.pipeline.syncOperations.addHandler(Answer { status in sender.value.answered(status) })
                    stream.write(HTTP2Frame.FramePayload.headers(.init(headers: headers)), promise: nil)
                    stream.writeAndFlush(HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(payload), endStream: true)),
                                         promise: nil)
                }
            }
        }

        func answered(_ status: Int) {
            inFlight -= 1
            answered += 1
            if status == 200 { progress.accepted.add(1, ordering: .relaxed) } else { progress.refused.add(1, ordering: .relaxed) }
            if status == 200 && window == 1 { window = plan.window }  // the token verified: the server opened its streams
            if answered >= plan.count {
                paced?.cancel()
                done.succeed(())
            } else if plan.rate == nil {
                open(upTo: Int.max)
            }
        }
    }

    /// One stream's answer: its `:status` when the stream ends (0 for a reset).
    final class Answer: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame.FramePayload

        let completion: (Int) -> Void
        var status = 0
        var reported = false

        init(completion: @escaping (Int) -> Void) { self.completion = completion }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var ended = false
            switch unwrapInboundIn(data) {
            case .headers(let h):
                if let s = h.headers.first(name: ":status").flatMap(Int.init) { status = s }
                ended = h.endStream
            case .data(let d): ended = d.endStream
            default: break
            }
            if ended { report() }
        }

        func channelInactive(context: ChannelHandlerContext) { report() }

        private func report() {
            guard !reported else { return }
            reported = true
            completion(status)
        }
    }
}
