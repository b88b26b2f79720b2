import CCSEngine
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2

/// The thin NIO side of one stream: the request read whole, then the connection's authentication,
/// the validator and the delivery decide its answer. HTTP/2 frames as they are, not an HTTP/1 view:
/// a provider may name the host in `host` instead of `:authority` (aioapns does; APNs takes it).
final class ProviderStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    /// More than the largest payload Apple takes (VoIP, 5 KB): enough to know a body is too large.
    static let bodyLimit = PushType.voip.payloadLimit + 1

    private let shared: ProviderConnectionContext
    private let services: ProviderServices
    private var head: HPACKHeaders?
    private var answered = false
    private var body: [UInt8] = []

    init(shared: ProviderConnectionContext, services: ProviderServices) {
        self.shared = shared
        self.services = services
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var ended = false
        switch unwrapInboundIn(data) {
        case .headers(let h):
            if head == nil { head = h.headers }  // a second HEADERS frame is the trailers
            ended = h.endStream
        case .data(let d):
            if case .byteBuffer(var bytes) = d.data {
                // Bytes past the limit are dropped: the body is too large whatever they are (413).
                let room = Self.bodyLimit - body.count
                if room > 0, let taken = bytes.readBytes(length: min(room, bytes.readableBytes)) { body += taken }
            }
            ended = d.endStream
        default:
            break
        }
        guard ended, !answered, let head else { return }
        answered = true
        respond(to: request(head), context: context)
    }

    private func request(_ head: HPACKHeaders) -> ProviderRequest {
        // Names arrive lower case over HTTP/2; the pseudo-headers are among them.
        let headers = head.map { (name: $0.name.lowercased(), value: $0.value) }
        return ProviderRequest(method: head.first(name: ":method") ?? "", path: head.first(name: ":path") ?? "",
                               headers: headers, body: body)
    }

    private func respond(to request: ProviderRequest, context: ChannelHandlerContext) {
        if shared.shuttingDown { return write(.refused(.shutdown, apnsID: nil), context: context) }
        let deviceToken: String
        switch request.deviceToken() {
        case .failure(let reason): return write(.refused(reason, apnsID: nil), context: context)
        case .success(let token): deviceToken = token
        }
        let environment = ProviderEnvironment(authority: request.authority)
        let keys = services.keys
        let decision = shared.connection.authorize(request.header("authorization"), environment: environment,
                                                   nowSeconds: services.engine.clock.nowMillis() / 1000,
                                                   keys: { keys.key(id: $0) })
        if decision.opensStreams, let parent = context.channel.parent { ProviderConnectionContext.openStreams(on: parent) }
        let authorization: ProviderConnection.Authorization
        switch decision.outcome {
        case .failure(let reason): return refuse(reason, request, deviceToken: deviceToken, context: context)
        case .success(let a): authorization = a
        }
        let notification: ProviderNotification
        switch ProviderRequestValidator().validate(request, deviceToken: deviceToken, authorization: authorization) {
        case .failure(let reason): return refuse(reason, request, deviceToken: deviceToken, context: context)
        case .success(let n): notification = n
        }
        let loop = context.eventLoop
        let handler = NIOLoopBound(self, eventLoop: loop)
        let boundContext = NIOLoopBound(context, eventLoop: loop)
        ProviderDelivery(engine: services.engine).send(notification, environment: environment, connection: shared.name) { answer in
            loop.execute { handler.value.write(answer, context: boundContext.value) }
        }
    }

    /// A request refused before the engine: answered, and told to the journal and metrics.
    private func refuse(_ reason: ProviderReason, _ request: ProviderRequest, deviceToken: String,
                        context: ChannelHandlerContext) {
        let answer = ProviderAnswer.refused(reason, apnsID: request.header("apns-id"))
        services.engine.recordRefused(api: .apnsHTTP2, sender: nil, token: deviceToken, topic: request.header("apns-topic"),
                                      connection: shared.name, clientMessageID: request.header("apns-id"),
                                      detail: answer.reasonText)
        write(answer, context: context)
    }

    private func write(_ answer: ProviderAnswer, context: ChannelHandlerContext) {
        var headers = HPACKHeaders([(":status", String(answer.status))])
        for h in answer.headers { headers.add(name: h.name, value: h.value) }
        guard let body = answer.body else {
            context.writeAndFlush(wrapOutboundOut(.headers(.init(headers: headers, endStream: true))), promise: nil)
            return
        }
        headers.add(name: "content-length", value: String(body.utf8.count))
        context.write(wrapOutboundOut(.headers(.init(headers: headers))), promise: nil)
        let buffer = context.channel.allocator.buffer(string: body)
        context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(buffer), endStream: true))), promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        services.logger.debug("APNs HTTP/2 stream error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }
}
