import NIOCore
import NIOEmbedded
import Testing
@testable import LoadGenerator

/// The generator's XMPP clients against scripted server bytes (no sockets, no TLS).
@Suite("Client connections")
struct ClientConnectionTests {
    final class Harness {
        let channel = EmbeddedChannel()
        let recorder: LoopRecorder
        let established: EventLoopPromise<Void>

        init() {
            recorder = LoopRecorder(loop: channel.embeddedEventLoop)
            established = channel.embeddedEventLoop.makePromise(of: Void.self)
        }

        func start(_ handler: BenchConnection) throws {
            try channel.pipeline.syncOperations.addHandler(handler)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 5235)).wait()
        }

        /// Everything the client has written so far, as one string.
        func written() throws -> String {
            var text = ""
            while let b = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: b) }
            return text
        }

        func serverSends(_ text: String) throws {
            try channel.writeInbound(ByteBuffer(string: text))
        }

        /// Stream, SASL PLAIN, restart, bind: checks every client step on the way.
        func login(domain: String, saslPayload: String) throws {
            #expect(try written().hasPrefix("<stream:stream to=\"\(domain)\" version=\"1.0\""))
            try serverSends("<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' id='s1' from='\(domain)' version='1.0'>"
                            + "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>X-OAUTH2</mechanism><mechanism>PLAIN</mechanism></mechanisms></stream:features>")
            #expect(try written() == "<auth xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\" mechanism=\"PLAIN\">\(saslPayload)</auth>")
            try serverSends("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
            #expect(try written().hasPrefix("<stream:stream to=\"\(domain)\""))
            try serverSends("<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' id='s2' version='1.0'>"
                            + "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/></stream:features>")
            #expect(try written().contains("<bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\""))
            try serverSends("<iq type='result' id='bind-1'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>x@\(domain)/r</jid></bind></iq>")
        }
    }

    @Test func appServerSendsWithinTheWindowAndMatchesAcks() throws {
        let h = Harness()
        let control = RunControl()
        let plan = SendPlan(mode: .closedLoop, quota: 5, window: 2, perSecond: 0, phase: 0)
        let handler = AppServerConnection(
            login: XMPPLogin(domain: "gcm.googleapis.com", user: "123@gcm.googleapis.com", password: "key"),
            recorder: h.recorder, established: h.established, index: 3,
            sending: (plan: plan, control: control, recipients: Recipients(["tokA", "tokB"])), payloadBytes: 4)
        try h.start(handler)
        try h.login(domain: "gcm.googleapis.com", saslPayload: StanzaWriter.base64(Array("\0123@gcm.googleapis.com\0key".utf8)))
        try h.established.futureResult.wait()

        // Not started: nothing goes out.
        handler.tick(now: 10)
        #expect(try h.written() == "")
        control.start(at: 1_000)
        handler.tick(now: 2_000)
        let first = try h.written()
        #expect(first == #"<message><gcm xmlns="google:mobile:data">{"to":"tokB","message_id":"b3.0","data":{"bt":"2000","p":"xxxx"}}</gcm></message>"#
            + #"<message><gcm xmlns="google:mobile:data">{"to":"tokA","message_id":"b3.1","data":{"bt":"2000","p":"xxxx"}}</gcm></message>"#)
        handler.tick(now: 3_000)
        #expect(try h.written() == "") // the window of 2 is full
        #expect(h.recorder.sent.load(ordering: .relaxed) == 2)

        // An ACK opens the window again; the next message goes out at once.
        try h.serverSends(#"<message><gcm xmlns="google:mobile:data">{"from":"tokB","message_id":"b3.0","message_type":"ack"}</gcm></message>"#)
        #expect(h.recorder.acked.load(ordering: .relaxed) == 1)
        #expect(try h.written().contains(#""message_id":"b3.2""#))
        // A NACK counts and frees its slot; an ACK for a message never sent is unexpected.
        try h.serverSends(#"<message><gcm xmlns="google:mobile:data">{"message_type":"nack","message_id":"b3.1","error":"BAD_REGISTRATION"}</gcm></message>"#
                          + #"<message><gcm xmlns="google:mobile:data">{"message_id":"b3.99","message_type":"ack"}</gcm></message>"#)
        #expect(h.recorder.nacked.load(ordering: .relaxed) == 1)
        #expect(h.recorder.unexpected.load(ordering: .relaxed) == 1)
        #expect(try h.written().contains(#""message_id":"b3.3""#))
        // A stanza error answers a message too.
        try h.serverSends(#"<message id="x" type="error"><gcm xmlns="google:mobile:data">{"to":"tokB","message_id":"b3.2"}</gcm><error/></message>"#)
        #expect(h.recorder.errors.load(ordering: .relaxed) == 1)
        #expect(try h.written().contains(#""message_id":"b3.4""#))
        // The quota of 5 is reached.
        try h.serverSends(#"<message><gcm xmlns="google:mobile:data">{"message_id":"b3.3","message_type":"ack"}</gcm></message>"#)
        #expect(try h.written() == "")
        #expect(h.recorder.sent.load(ordering: .relaxed) == 5)
        #expect(h.recorder.ackLatency.summary.count == 2)
    }

    @Test func appServerAcksUpstreamAndCreditsTheDevice() throws {
        let h = Harness()
        let credits = DeliveryCredits(senders: 8)
        let handler = AppServerConnection(
            login: XMPPLogin(domain: "gcm.googleapis.com", user: "1@gcm.googleapis.com", password: "k"),
            recorder: h.recorder, established: h.established, index: 0, sending: nil, upstreamCredits: credits,
            payloadBytes: 0)
        try h.start(handler)
        try h.login(domain: "gcm.googleapis.com", saslPayload: StanzaWriter.base64(Array("\01@gcm.googleapis.com\0k".utf8)))
        try h.serverSends(#"<message to="1@gcm.googleapis.com" from="devices@gcm.googleapis.com" type="normal"><gcm xmlns="google:mobile:data">{"category":"com.example.bench","data":{"bt":"12","p":""},"message_id":"u7.41","from":"tok:APA91b"}</gcm></message>"#)
        #expect(try h.written() == #"<message><gcm xmlns="google:mobile:data">{"to":"tok:APA91b","message_id":"u7.41","message_type":"ack"}</gcm></message>"#)
        #expect(h.recorder.delivered.load(ordering: .relaxed) == 1)
        #expect(credits.credits[7].value.load(ordering: .relaxed) == 1)
    }

    @Test func deviceAcksWithTheStanzaID() throws {
        let h = Harness()
        let handler = DeviceChannelConnection(
            login: XMPPLogin(domain: "devices.ccs-emulator", user: "dev1", password: "secret", resource: "device"),
            recorder: h.recorder, established: h.established, index: 0, upstream: nil, payloadBytes: 0)
        try h.start(handler)
        try h.login(domain: "devices.ccs-emulator", saslPayload: StanzaWriter.base64(Array("\0dev1\0secret".utf8)))
        try h.serverSends(#"<message id="0:1712%ab"><gcm xmlns="google:mobile:data">{"data":{"bt":"5","p":"xx"},"from":"123","message_id":"0:1712%ab"}</gcm></message>"#
                          + #"<iq type="get" id="ping-9"><ping xmlns="urn:xmpp:ping"/></iq>"#)
        // First, once the session is up: no platform views for this connection (it only ACKs).
        #expect(try h.written() == #"<message><gcm xmlns="google:mobile:data">{"message_type":"views","enabled":false}</gcm></message>"#
            + #"<message><gcm xmlns="google:mobile:data">{"message_type":"ack","message_id":"0:1712%ab"}</gcm></message>"#
            + #"<iq type="result" id="ping-9"/>"#)
        #expect(h.recorder.delivered.load(ordering: .relaxed) == 1)
        #expect(h.recorder.unexpected.load(ordering: .relaxed) == 0)
    }

    @Test func chatReceiverCreditsTheSender() throws {
        let h = Harness()
        let credits = DeliveryCredits(senders: 3)
        let handler = ChatConnection(
            login: XMPPLogin(domain: "localhost", user: "user9", password: "password", resource: "bench", sendPresence: true),
            recorder: h.recorder, established: h.established, index: 0, sending: nil, credits: credits, payloadBytes: 0)
        try h.start(handler)
        try h.login(domain: "localhost", saslPayload: StanzaWriter.base64(Array("\0user9\0password".utf8)))
        #expect(try h.written() == "<presence/>")
        try h.serverSends("<message from='user2@localhost/bench' to='user9@localhost/bench' type='chat'><body>2 17 123 xxxx</body></message>"
                          + "<message type='chat'><body>no numbers here</body></message>")
        #expect(h.recorder.delivered.load(ordering: .relaxed) == 1)
        #expect(credits.credits[2].value.load(ordering: .relaxed) == 1)
        #expect(h.recorder.unexpected.load(ordering: .relaxed) == 1)
    }

    @Test func chatSenderWindowClosesOnDelivery() throws {
        let h = Harness()
        let control = RunControl()
        let credits = DeliveryCredits(senders: 1)
        let plan = SendPlan(mode: .closedLoop, quota: nil, window: 3, perSecond: 0, phase: 0)
        let handler = ChatConnection(
            login: XMPPLogin(domain: "localhost", user: "user1", password: "password", resource: "bench"),
            recorder: h.recorder, established: h.established, index: 0,
            sending: (plan: plan, control: control, recipients: Recipients(["user2@localhost/bench"])),
            credits: credits, payloadBytes: 2)
        try h.start(handler)
        try h.login(domain: "localhost", saslPayload: StanzaWriter.base64(Array("\0user1\0password".utf8)))
        control.start(at: 100)
        handler.tick(now: 200)
        let sent = try h.written()
        #expect(sent.components(separatedBy: "<message type=\"chat\" to=\"user2@localhost/bench\"><body>0 ").count == 4)
        #expect(sent.hasSuffix("<body>0 2 200 xx</body></message>"))
        handler.tick(now: 300)
        #expect(try h.written() == "")
        credits.credits[0].value.add(2, ordering: .relaxed)
        handler.tick(now: 400)
        #expect(try h.written() == "<message type=\"chat\" to=\"user2@localhost/bench\"><body>0 3 400 xx</body></message>"
            + "<message type=\"chat\" to=\"user2@localhost/bench\"><body>0 4 400 xx</body></message>")
        control.stop()
        credits.credits[0].value.add(3, ordering: .relaxed)
        handler.tick(now: 500)
        #expect(try h.written() == "")
    }

    @Test func failedAuthenticationFailsTheLogin() throws {
        let h = Harness()
        let handler = DeviceChannelConnection(
            login: XMPPLogin(domain: "devices.ccs-emulator", user: "dev1", password: "wrong"),
            recorder: h.recorder, established: h.established, index: 0, upstream: nil, payloadBytes: 0)
        try h.start(handler)
        _ = try h.written()
        try h.serverSends("<stream:stream xmlns:stream='http://etherx.jabber.org/streams' xmlns='jabber:client'>"
                          + "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>"
                          + "<failure xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><not-authorized/></failure>")
        #expect(throws: LoginFailed.self) { try h.established.futureResult.wait() }
    }
}
