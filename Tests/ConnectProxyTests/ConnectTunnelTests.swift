@testable import ConnectProxy
import NIOCore
import Logging
import NIOEmbedded
import Testing

let fcm = ConnectDestination(host: "fcm.googleapis.com", port: 443)
let ccs = ConnectDestination(host: "fcm-xmpp.googleapis.com", port: 5235)

func feed(_ tunnel: inout ConnectTunnel, _ text: String) -> ConnectTunnel.ReadAction {
    tunnel.read(ByteBuffer(string: text))
}

func refusalStatus(_ action: ConnectTunnel.ReadAction) -> Int? {
    if case .refuse(let refusal) = action { return refusal.status }
    return nil
}

@Suite struct ConnectTunnelTests {
    @Test func connectToAPlayedHostInPieces() {
        var tunnel = ConnectTunnel(allowed: [fcm, ccs])
        #expect(feed(&tunnel, "CONNECT FCM.googleapis.com.:443 HTTP/1.1\r\nHost: fcm") == .wait)
        // The ClientHello right behind the head is held, then relayed after the 200.
        #expect(feed(&tunnel, ".googleapis.com:443\r\n\r\n\u{16}\u{3}") == .connect(fcm))
        #expect(feed(&tunnel, "more") == .hold)
        #expect(tunnel.upstreamConnected() == [ByteBuffer(string: "\u{16}\u{3}"), ByteBuffer(string: "more")])
        #expect(feed(&tunnel, "x") == .forward(ByteBuffer(string: "x")))
    }

    @Test func ccsPortAndBareLineFeeds() {
        var tunnel = ConnectTunnel(allowed: [fcm, ccs])
        #expect(feed(&tunnel, "CONNECT fcm-xmpp.googleapis.com:5235 HTTP/1.0\n\n") == .connect(ccs))
        #expect(tunnel.upstreamConnected().isEmpty)
    }

    @Test(arguments: [
        ("CONNECT example.com:443 HTTP/1.1\r\n\r\n", 403),
        ("CONNECT fcm.googleapis.com:444 HTTP/1.1\r\n\r\n", 403),
        ("CONNECT [::1]:443 HTTP/1.1\r\n\r\n", 403),
        ("CONNECT fcm.googleapis.com HTTP/1.1\r\n\r\n", 400),
        ("CONNECT fcm.googleapis.com:0 HTTP/1.1\r\n\r\n", 400),
        ("CONNECT fcm.googleapis.com:65536 HTTP/1.1\r\n\r\n", 400),
        ("CONNECT fcm.googleapis.com:+443 HTTP/1.1\r\n\r\n", 400),
        ("CONNECT :443 HTTP/1.1\r\n\r\n", 400),
        ("CONNECT fcm.googleapis.com:443 HTTP/2\r\n\r\n", 400),
        ("CONNECT fcm.googleapis.com:443\r\n\r\n", 400),
        ("CONNECT  fcm.googleapis.com:443 HTTP/1.1\r\n\r\n", 400),
        ("CONNECT fcm\u{0}.googleapis.com:443 HTTP/1.1\r\n\r\n", 400),
        ("CONNECT fcm.googleapis.com/x:443 HTTP/1.1\r\n\r\n", 400),
        ("\r\n\r\n", 400),
        ("GET http://fcm.googleapis.com/ HTTP/1.1\r\n\r\n", 405),
    ])
    func refusals(request: String, status: Int) {
        var tunnel = ConnectTunnel(allowed: [fcm, ccs])
        #expect(refusalStatus(feed(&tunnel, request)) == status)
        // Closed after a refusal: nothing more is taken.
        #expect(feed(&tunnel, "CONNECT fcm.googleapis.com:443 HTTP/1.1\r\n\r\n") == .drop)
    }

    @Test func anEndlessHeadIsRefusedAtTheLimit() {
        var tunnel = ConnectTunnel(allowed: [fcm])
        #expect(feed(&tunnel, "CONNECT fcm.googleapis.com:443 HTTP/1.1\r\n") == .wait)
        let line = "X-Padding: " + String(repeating: "a", count: 1000) + "\r\n"
        var last = ConnectTunnel.ReadAction.wait
        for _ in 0..<9 where last == .wait { last = feed(&tunnel, line) }
        #expect(refusalStatus(last) == 400)
    }

    @Test func upstreamFailureIsABadGateway() {
        var tunnel = ConnectTunnel(allowed: [fcm])
        #expect(feed(&tunnel, "CONNECT fcm.googleapis.com:443 HTTP/1.1\r\n\r\n") == .connect(fcm))
        #expect(tunnel.upstreamFailed("refused")?.status == 502)
        #expect(tunnel.upstreamFailed("again") == nil)
    }

    @Test func refusalResponseIsCompleteHTTP() {
        let response = ConnectRefusal.forbidden("no").response
        #expect(response == "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=UTF-8\r\nContent-Length: 3\r\nConnection: close\r\n\r\nno\n")
    }

    /// The handler on a channel: a refusal is written and the connection closed, no crash.
    @Test func handlerRefusesAndCloses() throws {
        let channel = EmbeddedChannel()
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: 1)
        try channel.pipeline.syncOperations.addHandler(ConnectProxyHandler(routes: [fcm: address], logger: .init(label: "test")))
        try channel.connect(to: address).wait()
        try channel.writeInbound(ByteBuffer(string: "CONNECT evil.example:443 HTTP/1.1\r\n\r\n"))
        let written = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(String(buffer: written).hasPrefix("HTTP/1.1 403 Forbidden\r\n"))
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
    }
}
