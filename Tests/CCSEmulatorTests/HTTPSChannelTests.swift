@testable import CCSEmulator
import NIOCore
import NIOEmbedded
import NIOTLS
import Testing

@Suite struct HTTPSChannelTests {
    /// A frame header (RFC 9113 §4.1) followed by `length` payload bytes.
    static func frame(type: UInt8, length: Int, stream: UInt32 = 0) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), type, 0]
        bytes += [UInt8(stream >> 24 & 0xff), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff)]
        return bytes + [UInt8](repeating: type, count: length)
    }

    @Test func theScannerFollowsFramesWrittenInAnyPieces() {
        // SETTINGS (type 4) whose payload holds the byte 7, a DATA frame, then a GOAWAY.
        let stream = Self.frame(type: 0x4, length: 12) + Self.frame(type: 0x0, length: 7, stream: 1)
            + Self.frame(type: 0x7, length: 8)
        for pieceSize in [1, 2, 5, 9, 10, 64] {
            var scanner = HTTP2FrameHeaderScanner()
            var foundIn: [Range<Int>] = []
            var offset = 0
            while offset < stream.count {
                let end = min(offset + pieceSize, stream.count)
                if scanner.scan(stream[offset..<end], for: HTTP2FrameHeaderScanner.goAway) { foundIn.append(offset..<end) }
                offset = end
            }
            // Found once, in the piece that completes the GOAWAY's 9-byte header.
            let lastHeaderByte = 21 + 16 + 8
            #expect(foundIn.count == 1, "piece size \(pieceSize)")
            #expect(foundIn.first?.contains(lastHeaderByte) == true, "piece size \(pieceSize)")
        }
        // A DATA frame whose payload went out as a file region (not through `scan`).
        var skipping = HTTP2FrameHeaderScanner()
        let data = Self.frame(type: 0x0, length: 100, stream: 1)
        let inHeader = skipping.scan(data.prefix(9), for: HTTP2FrameHeaderScanner.goAway)
        #expect(!inHeader)
        skipping.skipPayload(100)
        let afterRegion = skipping.scan(Self.frame(type: 0x7, length: 8), for: HTTP2FrameHeaderScanner.goAway)
        #expect(afterRegion)

        var none = HTTP2FrameHeaderScanner()
        let found = none.scan(Self.frame(type: 0x4, length: 30) + Self.frame(type: 0x6, length: 8), for: HTTP2FrameHeaderScanner.goAway)
        #expect(!found)
    }

    @Test func aGoAwayThatIsNotAnsweredClosesTheConnectionAfterTheTimeout() throws {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(handler: HTTP2GoAwayDeadline(timeout: .seconds(2)), loop: loop)
        try channel.connect(to: .init(ipAddress: "127.0.0.1", port: 1)).wait()
        try channel.writeOutbound(ByteBuffer(bytes: Self.frame(type: 0x4, length: 6)))
        loop.advanceTime(by: .seconds(10))
        #expect(channel.isActive, "no GOAWAY yet: nothing to wait for")
        try channel.writeOutbound(ByteBuffer(bytes: Self.frame(type: 0x7, length: 8) + Self.frame(type: 0x6, length: 8)))
        loop.advanceTime(by: .milliseconds(1999))
        #expect(channel.isActive)
        loop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
    }

    @Test func aHandshakeThatDoesNotFinishClosesTheConnection() throws {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(handler: TLSHandshakeDeadline(timeout: .seconds(2)), loop: loop)
        try channel.connect(to: .init(ipAddress: "127.0.0.1", port: 1)).wait()
        loop.advanceTime(by: .seconds(2))
        #expect(!channel.isActive)
    }

    @Test func aFinishedH2HandshakeHandsOverToTheGoAwayDeadline() throws {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(handler: TLSHandshakeDeadline(timeout: .seconds(2)), loop: loop)
        try channel.connect(to: .init(ipAddress: "127.0.0.1", port: 1)).wait()
        channel.pipeline.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: "h2"))
        loop.advanceTime(by: .seconds(60))
        #expect(channel.isActive)
        #expect(throws: ChannelPipelineError.notFound) {
            try channel.pipeline.syncOperations.handler(type: TLSHandshakeDeadline.self)
        }
        _ = try channel.pipeline.syncOperations.handler(type: HTTP2GoAwayDeadline.self)

        let http1 = EmbeddedChannel(handler: TLSHandshakeDeadline(timeout: .seconds(2)), loop: loop)
        try http1.connect(to: .init(ipAddress: "127.0.0.1", port: 1)).wait()
        http1.pipeline.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: "http/1.1"))
        loop.advanceTime(by: .seconds(60))
        #expect(http1.isActive)
        #expect(throws: ChannelPipelineError.notFound) {
            try http1.pipeline.syncOperations.handler(type: HTTP2GoAwayDeadline.self)
        }
    }
}
