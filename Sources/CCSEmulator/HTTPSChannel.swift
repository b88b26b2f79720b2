import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOSSL
import NIOTLS

/// The TLS HTTP listener's connections (`--https-port`, and proxy mode's tunnels, which reach it):
/// HTTP/2 when the client offers `h2` in ALPN, as fcm.googleapis.com answers it, HTTP/1.1 otherwise.
/// A client whose HTTP/2 session does not fall back to HTTP/1.1 needs the first; every other
/// client gets what it had before.
///
/// Hummingbird's `HTTP2UpgradeChannel` does the negotiation. What it leaves open are two slow
/// clients (docs/hardening.md): one that never finishes the TLS handshake (the HTTP/1.1 request
/// deadlines only start once a protocol is chosen), closed by `TLSHandshakeDeadline` after the
/// request timeout; and an h2 client that never answers the PING sent with a GOAWAY (Hummingbird
/// starts its graceful-close timer only at that answer), closed by `HTTP2GoAwayDeadline` the same
/// time after the server's first GOAWAY.
struct HTTPSChannel: ServerChildChannel {
    typealias Value = HTTP2UpgradeChannel.Value
    let base: HTTP2UpgradeChannel
    let handshakeTimeout: TimeAmount

    init(tlsConfiguration: TLSConfiguration, requestTimeout: TimeAmount, streamConfiguration: HTTP1Channel.Configuration,
         responder: @escaping HTTPChannelHandler.Responder) throws {
        // An h2 connection with no open stream is closed after the timeout that closes an idle
        // HTTP/1.1 keep-alive connection (with a GOAWAY, which clients take as "reconnect"); a
        // client that does not answer the GOAWAY's PING is cut off after the same time again
        // (without a limit, the graceful close would wait for it forever).
        let timeout = Duration.nanoseconds(requestTimeout.nanoseconds)
        base = try HTTP2UpgradeChannel(
            tlsConfiguration: tlsConfiguration,
            configuration: .init(idleTimeout: timeout, gracefulCloseTimeout: timeout, streamConfiguration: streamConfiguration),
            responder: responder)
        handshakeTimeout = requestTimeout
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let value = base.setup(channel: channel, logger: logger)
        do {
            let tls = try channel.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self)
            try channel.pipeline.syncOperations.addHandler(TLSHandshakeDeadline(timeout: handshakeTimeout),
                                                           position: .after(tls))
        } catch {
            channel.close(promise: nil)
            return channel.eventLoop.makeFailedFuture(error)
        }
        return value
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Closes the connection when its TLS handshake has not completed within `timeout` of the handler's
/// being added; steps out of the pipeline once it has.
final class TLSHandshakeDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    let timeout: TimeAmount
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

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let negotiated) = event as? TLSUserEvent {
            timer?.cancel()
            timer = nil
            if negotiated == "h2" {
                try? context.pipeline.syncOperations.addHandler(HTTP2GoAwayDeadline(timeout: timeout),
                                                                position: .after(self))
            }
            context.fireUserInboundEventTriggered(event)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// On an h2 connection, right after the TLS handler: reads the frame headers of what the server
/// writes and, at its first GOAWAY, closes the connection `timeout` later unless it closed by then.
final class HTTP2GoAwayDeadline: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    let timeout: TimeAmount
    private var frames = HTTP2FrameHeaderScanner()
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let goAway: Bool
        switch unwrapOutboundIn(data) {
        case .byteBuffer(let bytes): goAway = timer == nil && frames.scan(bytes.readableBytesView, for: HTTP2FrameHeaderScanner.goAway)
        case .fileRegion(let region): goAway = false; frames.skipPayload(region.readableBytes)  // a DATA frame's payload
        }
        if goAway {
            timer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { HTTPRequestDeadlines.close(context.channel) }
        }
        context.write(data, promise: promise)
    }
}

/// Follows HTTP/2 frame boundaries through a byte stream written in pieces (RFC 9113 §4.1: a 9-byte
/// header, 24-bit length first, then the type) and tells whether a frame of a given type began.
struct HTTP2FrameHeaderScanner {
    static let goAway: UInt8 = 0x7

    /// Payload bytes of the current frame still to come.
    private var payloadLeft = 0
    /// The current frame header's bytes seen so far (fewer than 9).
    private var header: [UInt8] = []

    /// Payload bytes written some other way than through `scan`.
    mutating func skipPayload(_ count: Int) {
        payloadLeft = max(0, payloadLeft - count)
    }

    mutating func scan<Bytes: Collection>(_ bytes: Bytes, for type: UInt8) -> Bool where Bytes.Element == UInt8 {
        var found = false
        var index = bytes.startIndex
        while index != bytes.endIndex {
            if payloadLeft > 0 {
                let skip = min(payloadLeft, bytes.distance(from: index, to: bytes.endIndex))
                index = bytes.index(index, offsetBy: skip)
                payloadLeft -= skip
                continue
            }
            header.append(bytes[index])
            index = bytes.index(after: index)
            if header.count == 9 {
                payloadLeft = Int(header[0]) << 16 | Int(header[1]) << 8 | Int(header[2])
                if header[3] == type { found = true }
                header.removeAll(keepingCapacity: true)
            }
        }
        return found
    }
}
