@testable import CCSEmulator
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import Testing

/// The HTTP listeners' deadlines (docs/hardening.md): for reading a request, never for writing a
/// response; and a 413 written before the body came closes the connection's output.
@Suite struct HTTPRequestDeadlinesTests {
    static func head(length: Int? = nil) -> HTTPRequestPart {
        var request = HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1", path: "/emulator/v1/events")
        if let length { request.headerFields[.contentLength] = String(length) }
        return .head(request)
    }

    static func response(_ status: HTTPResponse.Status) -> HTTPResponsePart { .head(HTTPResponse(status: status)) }

    static func channel(_ loop: EmbeddedEventLoop) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(handler: HTTPRequestDeadlines(timeout: .seconds(2)), loop: loop)
        try channel.connect(to: .init(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    @Test func aLongResponseIsUnderNoDeadlineAndTheNextHeadIsDueAfterIt() throws {
        let loop = EmbeddedEventLoop()
        let channel = try Self.channel(loop)
        try channel.writeInbound(Self.head())
        try channel.writeInbound(HTTPRequestPart.end(nil))
        try channel.writeOutbound(Self.response(.ok))
        for _ in 0..<30 {  // an event stream: a minute of writes, 2 s apart
            loop.advanceTime(by: .seconds(2))
            try channel.writeOutbound(HTTPResponsePart.body(ByteBuffer(string: ": keep-alive\n\n")))
        }
        #expect(channel.isActive, "the request deadline cut a response being written")
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        loop.advanceTime(by: .milliseconds(1999))
        #expect(channel.isActive)
        loop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive, "after the response, the next head is due within the timeout")
    }

    @Test func aSlowBodyIsStillClosed() throws {
        let loop = EmbeddedEventLoop()
        let channel = try Self.channel(loop)
        try channel.writeInbound(Self.head(length: 100))
        loop.advanceTime(by: .seconds(2))
        #expect(!channel.isActive)
    }

    @Test func a413BeforeTheBodyClosesTheOutputAndA413AfterItDoesNot() throws {
        var state = ExchangeState()
        #expect(state.read(Self.head(length: 1_000_000_000_000)) == .arm)
        #expect(state.wrote(Self.response(.contentTooLarge)) == .none)
        #expect(state.wrote(.end(nil)) == .closeOutput)

        var read = ExchangeState()
        _ = read.read(Self.head(length: 10))
        #expect(read.read(.end(nil)) == .pause)
        _ = read.wrote(Self.response(.contentTooLarge))
        #expect(read.wrote(.end(nil)) == .arm, "the body was read: the connection may serve the next request")

        var informational = ExchangeState()
        _ = informational.read(Self.head(length: 10))
        _ = informational.wrote(Self.response(.continue))
        _ = informational.wrote(Self.response(.ok))
        #expect(informational.wrote(.end(nil)) == .arm)
    }
}
