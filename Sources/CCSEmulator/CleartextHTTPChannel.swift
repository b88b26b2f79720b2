import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOTLS

/// The plain HTTP listener's connections (`--http-port`): HTTP/1.1, and HTTP/2 in cleartext with prior
/// knowledge (RFC 9113 §3.3: the client opens with the connection preface, as `curl
/// --http2-prior-knowledge` and httpx with `http1=False` do), told apart by the connection's first bytes.
///
/// Hummingbird 2 offers either HTTP/1.1 (`HTTP1Channel`) or cleartext HTTP/2 alone (`HTTP2Channel`,
/// `.plaintextHTTP2()`) on a port, not both. So this channel reads until the first bytes are, or
/// cannot be, the preface (`HTTP2Preface`) and then lets NIO's protocol-negotiation handler configure
/// one or the other, as ALPN does on the TLS port (`HTTPSChannel`): the negotiation handler takes the
/// decision as the event TLS would have raised, and Hummingbird's own channels do the rest.
///
/// `Upgrade: h2c` (RFC 7540 §3.2) is not served: RFC 9113 §3.1 deprecates it, Hummingbird has no
/// upgrader for it, and a client asking for it gets its answer over HTTP/1.1, which the upgrade
/// mechanism allows (docs/http-api.md).
struct CleartextHTTPChannel: ServerChildChannel {
    enum Negotiated: Sendable {
        case http1(HTTP1Channel.Value)
        case http2(HTTP2Channel.Value)
    }

    struct Value: ServerChildChannelValue {
        let negotiated: EventLoopFuture<Negotiated>
        let channel: any Channel
    }

    let http1: HTTP1Channel
    let http2: HTTP2Channel
    /// How long a connection may take to send enough bytes to tell its protocol (the request timeout).
    let requestTimeout: TimeAmount

    init(requestTimeout: TimeAmount, streamConfiguration: HTTP1Channel.Configuration,
         responder: @escaping HTTPChannelHandler.Responder) {
        // As on the TLS port: an idle h2 connection is closed after the request timeout, and a client
        // that does not answer the GOAWAY's PING the same time after.
        let timeout = Duration.nanoseconds(requestTimeout.nanoseconds)
        http1 = HTTP1Channel(responder: responder, configuration: streamConfiguration)
        http2 = HTTP2Channel(responder: responder, configuration: .init(idleTimeout: timeout, gracefulCloseTimeout: timeout,
                                                                      streamConfiguration: streamConfiguration))
        self.requestTimeout = requestTimeout
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let (http1, http2, timeout) = (self.http1, self.http2, requestTimeout)
        return channel.eventLoop.makeCompletedFuture {
            let negotiation = NIOTypedApplicationProtocolNegotiationHandler<Negotiated> { result, channel in
                guard case .negotiated(HTTP2PrefaceSniffer.http2Protocol) = result else {
                    return http1.setup(channel: channel, logger: logger).map { .http1($0) }
                }
                do {
                    try channel.pipeline.syncOperations.addHandler(HTTP2GoAwayDeadline(timeout: timeout), position: .first)
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
                return http2.setup(channel: channel, logger: logger).map { .http2($0) }
            }
            try channel.pipeline.syncOperations.addHandler(HTTP2PrefaceSniffer(timeout: timeout))
            try channel.pipeline.syncOperations.addHandler(negotiation)
            return Value(negotiated: negotiation.protocolNegotiationResult, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.negotiated.get() {
            case .http1(let connection): await http1.handle(value: connection, logger: logger)
            case .http2(let connection): await http2.handle(value: connection, logger: logger)
            }
        } catch {
            logger.debug("the connection closed before its protocol was known: \(error)")
        }
    }
}

/// RFC 9113 §3.4's connection preface, matched byte by byte as it arrives: the decision as soon as the
/// bytes so far are the whole preface (HTTP/2) or differ from it (HTTP/1.1). A value: fed bytes, it
/// answers; it keeps only how far it matched.
struct HTTP2Preface {
    static let bytes = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    enum Decision: Equatable {
        case http2
        case http1
    }

    /// Preface bytes matched so far.
    private(set) var matched = 0

    mutating func feed<Bytes: Sequence>(_ bytes: Bytes) -> Decision? where Bytes.Element == UInt8 {
        for byte in bytes {
            guard byte == Self.bytes[matched] else { return .http1 }
            matched += 1
            if matched == Self.bytes.count { return .http2 }
        }
        return nil
    }
}

/// First in a plain connection's pipeline: holds what the client sends until `HTTP2Preface` decides,
/// then tells the negotiation handler behind it (as TLS would tell it the ALPN result), passes the
/// bytes on and steps out. A client that has not sent enough to decide within `timeout` is closed
/// (the HTTP/1.1 request deadlines start only once a protocol is chosen).
final class HTTP2PrefaceSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The ALPN name the decision is passed on as.
    static let http2Protocol = "h2"

    let timeout: TimeAmount
    private var preface = HTTP2Preface()
    private var held: ByteBuffer?
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { HTTPRequestDeadlines.close(context.channel) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        let decision = preface.feed(bytes.readableBytesView)
        if held == nil { held = bytes } else { held!.writeBuffer(&bytes) }
        guard let decision else { return }
        timer?.cancel()
        timer = nil
        let negotiated = decision == .http2 ? Self.http2Protocol : nil
        context.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: negotiated))
        if let held { context.fireChannelRead(wrapInboundOut(held)) }
        held = nil
        context.fireChannelReadComplete()
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
