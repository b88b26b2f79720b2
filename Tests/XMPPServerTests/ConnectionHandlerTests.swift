import CCSEngine
import StoreModel
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import Testing
@testable import XMPPServer

/// The NIO adapter driven through an `EmbeddedChannel`: bytes in, bytes out, no sockets.
@Suite struct ConnectionHandlerTests {
    static let header = "<stream:stream to='gcm.googleapis.com' version='1.0' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>"
    static let auth = "<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>\(Data("\u{0}123@gcm.googleapis.com\u{0}key".utf8).base64EncodedString())</auth>"
    static let bind = "<iq type='set' id='b1'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/></iq>"

    /// One app-server connection on an embedded channel, with the engine behind it.
    final class Connection {
        let engine: Engine
        let channel = EmbeddedChannel()
        weak var weakHandler: XMPPConnectionHandler?
        weak var weakLink: ConnectionLink?

        init() throws {
            let store = InMemoryStore()
            engine = try Engine(committer: GroupCommitter(store: store), clock: VirtualClock(startMillis: 1_700_000_000_000),
                                configuration: .init())
            let handler = XMPPConnectionHandler(role: .appServer, engine: engine, configuration: XMPPServerConfiguration(),
                                                logger: Logger(label: "test"),
                                                mailbox: LoopMailbox(loop: channel.embeddedEventLoop))
            weakHandler = handler
            try channel.pipeline.syncOperations.addHandler(handler)
            weakLink = handler.link
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 5235)).wait()
        }

        deinit { engine.committer.shutdownBlocking() }

        /// Feeds `xml` and returns everything the handler wrote in answer.
        @discardableResult
        func send(_ xml: String) throws -> String {
            try channel.writeInbound(ByteBuffer(string: xml))
            channel.embeddedEventLoop.run()
            var out = ""
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { out += String(buffer: buffer) }
            return out
        }

        func establish() throws {
            _ = try send(ConnectionHandlerTests.header)
            #expect(try send(ConnectionHandlerTests.auth).contains("<success"))
            _ = try send(ConnectionHandlerTests.header)
            #expect(try send(ConnectionHandlerTests.bind).contains("<jid>123@gcm.googleapis.com/"))
        }
    }

    @Test func aClosedConnectionFreesItsHandlerAndLink() throws {
        let c = try Connection()
        try c.establish()
        #expect(c.engine.connectionCount(senderID: "123") == 1)
        #expect(c.weakHandler != nil && c.weakLink != nil)
        try c.channel.close().wait()
        c.channel.embeddedEventLoop.run()
        #expect(c.engine.connectionCount(senderID: "123") == 0)
        // Before the fix, handler and link held each other: both stayed alive for good.
        #expect(c.weakHandler == nil)
        #expect(c.weakLink == nil)
    }

    @Test func aLinkKeptAfterTheCloseDoesNotKeepTheHandler() throws {
        let c = try Connection()
        try c.establish()
        let kept = try #require(c.weakLink)
        try c.channel.close().wait()
        c.channel.embeddedEventLoop.run()
        #expect(c.weakHandler == nil)
        // Using the stale link is harmless: nothing is written, nothing traps.
        kept.sendOutbound([OutboundMessage(messageID: "m", json: "{}")])
        kept.close()
        c.channel.embeddedEventLoop.run()
    }

    @Test func aDownstreamBeforeTheBindIsRefusedAndNeverReachesTheEngine() throws {
        let c = try Connection()
        _ = try c.send(Self.header)
        _ = try c.send(Self.auth)
        _ = try c.send(Self.header)
        let out = try c.send("<message id=''><gcm xmlns='google:mobile:data'>{\"to\":\"x\",\"message_id\":\"m1\",\"data\":{}}</gcm></message>")
        #expect(out.contains("<stream:error><not-authorized"))
        #expect(!out.contains("\"message_type\":\"nack\""))
        #expect(c.engine.connectionCount(senderID: "123") == 0)
    }
}
