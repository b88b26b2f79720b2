import CCSProtocol
import Foundation
import Locking
import NIOCore
import NIOEmbedded
import Testing
@testable import DeviceSimulator

/// The simulated device's side of the device channel, driven through an `EmbeddedChannel`: what it
/// writes for each server answer, the events it reports, and its ACKs.
@Suite struct DeviceClientHandlerTests {
    static let credentials = DeviceCredentials(token: "tok", deviceID: "dd71bbe763774e31", secret: "s3cret",
                                               app: "com.example.app", senders: ["1"], platform: "android")
    static let serverHeader = "<stream:stream from='devices.ccs-emulator' id='1' version='1.0' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>"

    final class Events: Sendable {
        let list = Locked<[DeviceEvent]>([])
        func withLock<T>(_ body: (inout [DeviceEvent]) -> T) -> T { list.withLock { body(&$0) } }
    }

    final class Device {
        let channel = EmbeddedChannel()
        let events = Events()

        init() throws {
            let events = self.events
            let handler = DeviceClientHandler(credentials: DeviceClientHandlerTests.credentials,
                                              bound: channel.embeddedEventLoop.makePromise(),
                                              onEvent: { e in events.withLock { $0.append(e) } })
            try channel.pipeline.syncOperations.addHandler(handler)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 5228)).wait()
        }

        func written() throws -> String {
            var out = ""
            while let b = try channel.readOutbound(as: ByteBuffer.self) { out += String(buffer: b) }
            return out
        }

        func feed(_ xml: String) throws -> String {
            try channel.writeInbound(ByteBuffer(string: xml))
            return try written()
        }

        /// Runs the negotiation to the bound session.
        func connect() throws {
            #expect(try written().hasPrefix("<stream:stream to=\"devices.ccs-emulator\""))
            let auth = try feed(DeviceClientHandlerTests.serverHeader
                                + "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>")
            let payload = Data("\u{0}dd71bbe763774e31\u{0}s3cret".utf8).base64EncodedString()
            #expect(auth == "<auth xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\" mechanism=\"PLAIN\">\(payload)</auth>")
            #expect(try feed("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>").hasPrefix("<stream:stream "))
            let bind = try feed(DeviceClientHandlerTests.serverHeader
                                + "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/></stream:features>")
            #expect(bind.contains("<bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\">"))
            _ = try feed("<iq id='bind-1' type='result'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>d@devices.ccs-emulator/device</jid></bind></iq>")
            #expect(events.withLock { $0 } == [.connected])
        }
    }

    @Test func negotiatesAndReportsConnected() throws {
        try Device().connect()
    }

    @Test func aMessageIsReportedAndAckedWithItsStanzaID() throws {
        let d = try Device()
        try d.connect()
        let ack = try d.feed("<message id='0:1%ab'><gcm xmlns='google:mobile:data'>{\"data\":{\"k\":\"v\"},\"message_id\":\"0:1%ab\"}</gcm></message>")
        #expect(ack == "<message><gcm xmlns=\"google:mobile:data\">{\"message_id\":\"0:1%ab\",\"message_type\":\"ack\"}</gcm></message>")
        let tray = try d.feed("<message id='0:2%ab'><gcm xmlns='google:mobile:data'>{\"notification\":{\"title\":\"t\"}}</gcm><view xmlns='urn:ccs-emulator:device'>{\"platform\":\"ios\"}</view><tray xmlns='urn:ccs-emulator:device'/></message>")
        #expect(tray.contains("\"message_id\":\"0:2%ab\""))
        let events = d.events.withLock { $0 }
        #expect(events.count == 3)
        if case .message(let json, let toTray, _) = events[1] {
            #expect(json["data"]?["k"] == .string("v"))
            #expect(!toTray)
        } else { Issue.record("expected a message, got \(events[1])") }
        if case .message(_, _, let view) = events[1] { #expect(view == nil) }
        if case .message(_, let toTray, let view) = events[2] {
            #expect(toTray)
            #expect(view?["platform"] == .string("ios"))
        } else { Issue.record("expected a tray message") }
    }

    @Test func anUpstreamAnswerIsReportedAndNotAcked() throws {
        let d = try Device()
        try d.connect()
        let out = try d.feed("<message><gcm xmlns='google:mobile:data'>{\"message_type\":\"sent\",\"message_id\":\"u1\"}</gcm></message>")
        #expect(out.isEmpty)
        #expect(d.events.withLock { $0.last } == .upstreamAnswer(.object(["message_type": .string("sent"), "message_id": .string("u1")])))
    }

    @Test func aSASLFailureClosesWithAReason() throws {
        let d = try Device()
        _ = try d.written()
        _ = try d.feed(Self.serverHeader + "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>")
        _ = try d.feed("<failure xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><not-authorized/></failure></stream:stream>")
        d.channel.embeddedEventLoop.run()
        guard case .disconnected(let reason)? = d.events.withLock({ $0.last }) else { Issue.record("not disconnected"); return }
        #expect(reason?.contains("authentication failed") == true)
    }

    @Test func pingsAreAnswered() throws {
        let d = try Device()
        try d.connect()
        #expect(try d.feed("<iq type='get' id='p1'><ping xmlns='urn:xmpp:ping'/></iq>") == "<iq type=\"result\" id=\"p1\"/>")
    }
}
