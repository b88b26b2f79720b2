@testable import CCSEmulator
import NIOCore
import NIOEmbedded
import NIOTLS
import Testing

@Suite struct CleartextHTTPChannelTests {
    static let preface = HTTP2Preface.bytes

    @Test func thePrefaceDecidesAsSoonAsTheBytesTell() {
        for pieceSize in [1, 3, 24, 40] {
            var match = HTTP2Preface()
            let stream = Self.preface + Array("\u{0}\u{0}\u{0}\u{4}".utf8)
            var decision: HTTP2Preface.Decision?
            var offset = 0
            while decision == nil && offset < stream.count {
                let end = min(offset + pieceSize, stream.count)
                decision = match.feed(stream[offset..<end])
                offset = end
            }
            #expect(decision == .http2, "piece size \(pieceSize)")
        }
        var http1 = HTTP2Preface(), partial = HTTP2Preface(), empty = HTTP2Preface()
        let decisions = [http1.feed(Array("GET / HTTP/1.1\r\n".utf8)), partial.feed(Array("PRI * HTTP/2".utf8)),
                         partial.feed(Array(".1".utf8)), empty.feed([UInt8]())]
        #expect(decisions == [.http1, nil, .http1, nil])
    }

    /// Records the negotiation event and the bytes that follow it.
    final class Recorder: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        var events: [String?] = []
        var bytes: [UInt8] = []

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case .handshakeCompleted(let negotiated) = event as? TLSUserEvent { events.append(negotiated) }
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            bytes += Array(unwrapInboundIn(data).readableBytesView)
        }
    }

    @Test(arguments: [true, false])
    func theSnifferTellsTheProtocolThenPassesEveryByteOn(_ h2: Bool) throws {
        let recorder = Recorder()
        let channel = EmbeddedChannel(loop: EmbeddedEventLoop())
        try channel.pipeline.syncOperations.addHandlers([HTTP2PrefaceSniffer(timeout: .seconds(5)), recorder])
        let sent = h2 ? Self.preface + [0, 0, 0, 4] : Array("POST /fcm/send HTTP/1.1\r\n".utf8)
        try channel.writeInbound(ByteBuffer(bytes: sent.prefix(1)))
        #expect(recorder.events.isEmpty, "one byte (P) tells nothing yet")
        try channel.writeInbound(ByteBuffer(bytes: sent.dropFirst(1)))
        #expect(recorder.events == [h2 ? "h2" : nil])
        #expect(recorder.bytes == sent)
        #expect(throws: ChannelPipelineError.notFound) {
            try channel.pipeline.syncOperations.handler(type: HTTP2PrefaceSniffer.self)
        }
        _ = try channel.finish()
    }

    @Test func aClientThatSendsTooLittleIsClosed() throws {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(handler: HTTP2PrefaceSniffer(timeout: .seconds(2)), loop: loop)
        try channel.connect(to: .init(ipAddress: "127.0.0.1", port: 1)).wait()
        try channel.writeInbound(ByteBuffer(bytes: Self.preface.prefix(10)))
        loop.advanceTime(by: .milliseconds(1999))
        #expect(channel.isActive)
        loop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
    }
}
