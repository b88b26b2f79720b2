import StoreModel
import Locking
import NIOCore
import NIOEmbedded
import NIOPosix
import NIOSSL
@testable import PostgresStore
import Testing

/// The payloads nodes exchange before a write (docs/scaling.md): packed under PostgreSQL's limit,
/// read back line for line, and the offered message read by the same reader as `ccs_enqueue`'s.
@Suite struct LiveNotifierTests {
    @Test func linesArePackedPerChannelAndHeaderUnderTheLimitAndReadBack() throws {
        // Two fit a payload, three do not: a payload is packed to `plainLimit`, which sealed is under PostgreSQL's.
        let line = String(repeating: "x", count: 2_500)
        let items: [LiveNotifier.Item] = [
            .init(channel: "ccs_node_b", header: .confirmation, line: "id-1"),
            .init(channel: "ccs_node_b", header: .offer(from: "a1"), line: line),
            .init(channel: "ccs_node_b", header: .confirmation, line: "id-2"),
            .init(channel: "ccs_node_c", header: .confirmation, line: "id-3"),
            .init(channel: "ccs_node_b", header: .offer(from: "a1"), line: line),
            .init(channel: "ccs_node_b", header: .offer(from: "a1"), line: line),  // a third does not fit
            .init(channel: "ccs_node_b", header: .offer(from: "a1"), line: String(repeating: "y", count: 8_000)),  // never fits
        ]
        let (channels, payloads) = LiveNotifier.pack(items)
        #expect(channels == ["ccs_node_b", "ccs_node_b", "ccs_node_c", "ccs_node_b"])
        #expect(payloads.allSatisfy { $0.utf8.count <= LiveNotifier.plainLimit })
        let read = payloads.compactMap(LiveNotifier.Header.parse)
        #expect(read.count == 4)
        #expect(read[0].0 == .confirmation && read[0].1 == ["id-1", "id-2"])
        #expect(read[1].0 == .offer(from: "a1") && read[1].1 == [line[...], line[...]])
        #expect(read[2].0 == .confirmation && read[2].1 == ["id-3"])
        #expect(read[3].0 == .offer(from: "a1") && read[3].1 == [line[...]])
        // A token and a committed message's announcement are not live payloads.
        #expect(LiveNotifier.Header.parse("tok:APA91b") == nil)
        #expect(LiveNotifier.Header.parse("{\"token\":\"t\"}") == nil)
    }

    /// Issue 39, item 5: what a node takes from NOTIFY must come from a node. A payload sealed with the
    /// cluster's key for this channel opens; one sealed for another channel, with another key, altered,
    /// or not sealed at all does not, so an offer or a confirmation any role could NOTIFY is refused.
    @Test func onlyPayloadsSealedWithTheClustersKeyForTheChannelAreTaken() throws {
        let seal = NotifySeal(secret: "cluster secret")
        let sealed = seal.seal("\nC\nid-1", channel: "ccs_node_b")
        #expect(!sealed.contains("id-1"))
        #expect(seal.open(sealed, channel: "ccs_node_b") == "\nC\nid-1")
        #expect(seal.open(sealed, channel: "ccs_node_c") == nil)
        #expect(NotifySeal(secret: "another").open(sealed, channel: "ccs_node_b") == nil)
        var altered = Array(sealed.utf8)
        altered[10] = altered[10] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(seal.open(String(decoding: altered, as: UTF8.self), channel: "ccs_node_b") == nil)
        #expect(seal.open("!not base64", channel: "ccs_node_b") == nil)

        func read(_ payload: String) -> NodeChannelNotice { NodeChannelNotice.read(payload, channel: "ccs_node_b", seal: seal) }
        #expect(read(sealed) == .live(.confirmations(["id-1"])))
        #expect(read("\nC\nid-1") == .refused)
        #expect(read("\nL a\n" + LiveNotifier.line(NodeLinksTests.message)) == .refused)
        #expect(read(LiveNotifier.line(NodeLinksTests.message)) == .refused)
        #expect(read(seal.seal("\nC\nid-1", channel: "ccs_node_c")) == .refused)
        #expect(read("cAbC-_:APA91bxyz") == .queueChanged(token: "cAbC-_:APA91bxyz"))
        // Everything a node posts through NOTIFY goes sealed, and still under PostgreSQL's limit.
        let line = LiveNotifier.line(NodeLinksTests.message)
        let filler = String(repeating: "z", count: LiveNotifier.plainLimit - 16)
        let (channels, payloads) = LiveNotifier.pack([.init(channel: "ccs_node_b", header: .offer(from: "a"), line: line),
                                                      .init(channel: "ccs_node_b", header: .confirmation, line: filler)])
        for (channel, payload) in zip(channels, payloads) {
            #expect(seal.seal(payload, channel: channel).utf8.count <= LiveNotifier.payloadLimit)
        }
    }

    @Test func anOfferedMessageIsReadLikeACommittedOnesAnnouncement() throws {
        let m = QueuedMessage(token: "t:1", deviceMessageID: "0:1%ab", senderID: "111", appMessageID: "m \"1\"\n",
                              collapseKey: "k", priority: "high", timeToLive: 60, enqueuedAt: 1_000, expiresAt: 61_000,
                              deliveryReceiptRequested: false, delayWhileIdle: true, isNotification: true,
                              payload: #"{"data":{"a":"é\n"}}"#, platformBlocks: #"{"android":{}}"#)
        let line = LiveNotifier.line(m)
        #expect(!line.contains("\n"))
        #expect(PostgresCluster.message(fromAnnouncement: line) == m)
        // Through NOTIFY, read as a link would carry it.
        let (_, payloads) = LiveNotifier.pack([.init(channel: "ccs_node_b", header: .offer(from: "a"), line: line)])
        #expect(payloads.compactMap(LiveNotifier.decode) == [.offers(from: "a", [m])])
        #expect(LiveNotifier.decode("\nC\nid-1\nid-2") == .confirmations(["id-1", "id-2"]))
        var plain = m
        plain.collapseKey = nil
        plain.platformBlocks = nil
        #expect(PostgresCluster.message(fromAnnouncement: LiveNotifier.line(plain)) == plain)
    }
}

/// The direct links between nodes: their frames read back whole, and over loopback (TLS keyed by the
/// listener's secret) they arrive in order; a link that does not know the listener's secret, as its
/// TLS key or in its hello, is closed before anything it sends is taken.
@Suite struct NodeLinksTests {
    final class Inbox: NodeLinkReceiver {
        let frames = Locked<[LinkFrames.Decoded]>([])
        func linkReceived(_ frame: LinkFrames.Decoded) { frames.withLock { $0.append(frame) } }
        var confirmations: [String] {
            frames.withLock { $0 }.flatMap { f -> [String] in if case .confirmations(let ids) = f { ids } else { [] } }
        }
        var offers: [QueuedMessage] {
            frames.withLock { $0 }.flatMap { f -> [QueuedMessage] in if case .offers(_, let m) = f { m } else { [] } }
        }
    }

    static let message = QueuedMessage(token: "t:1", deviceMessageID: "0:1%ab", senderID: "111", appMessageID: "m \"1\"\n",
                                       collapseKey: "k", priority: "high", timeToLive: 60, enqueuedAt: 1_000,
                                       expiresAt: 61_000, deliveryReceiptRequested: false, delayWhileIdle: true,
                                       isNotification: true, payload: #"{"data":{"a":"é\n"}}"#,
                                       platformBlocks: #"{"android":{}}"#)

    @Test func framesReadBackWholeAndACutOrPaddedFrameDoesNot() throws {
        var plain = Self.message
        plain.collapseKey = nil
        plain.platformBlocks = nil
        var buffer = ByteBuffer()
        LinkFrames.writeOffers([Self.message, plain], from: "node-a", to: &buffer)
        LinkFrames.writeConfirmations(["id-1", "id-2"], to: &buffer)
        var frames: [ByteBuffer] = []
        while let length = buffer.readInteger(as: UInt32.self) { frames.append(buffer.readSlice(length: Int(length))!) }
        #expect(frames.count == 2)
        #expect(LinkFrames.decode(frames[0]) == .offers(from: "node-a", [Self.message, plain]))
        #expect(LinkFrames.decode(frames[1]) == .confirmations(["id-1", "id-2"]))
        #expect(LinkFrames.decode(frames[0].getSlice(at: frames[0].readerIndex, length: frames[0].readableBytes - 1)!) == nil)
        var padded = frames[1]
        padded.writeInteger(UInt8(0))
        #expect(LinkFrames.decode(padded) == nil)
        #expect(LinkFrames.decode(ByteBuffer(bytes: [9])) == nil)
        #expect(LinkFrames.decode(ByteBuffer(bytes: [2, 0xFF, 0xFF, 0xFF, 0xFF])) == nil)
    }

    func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        while !condition() {
            guard ContinuousClock.now < deadline else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    @Test func whatIsPostedToANodeArrivesOnceItsLinkIsUp() async throws {
        let inbox = Inbox()
        let endpoint = Locked<NodeLinks.Endpoint?>(nil)
        let group = MultiThreadedEventLoopGroup.singleton
        let b = NodeLinks(group: group, nodeID: "b", logger: .init(label: "b")) { _ in nil }
        let a = NodeLinks(group: group, nodeID: "a", logger: .init(label: "a")) { node in node == "b" ? endpoint.withLock { $0 } : nil }
        defer { a.close(); b.close() }
        b.setReceiver(inbox)
        let port = try b.listen(host: "127.0.0.1", port: 0)
        endpoint.withLock { $0 = .init(host: "127.0.0.1", port: port, secret: b.secret) }
        // The first post starts the link and goes the caller's other way; posting goes on until one is taken.
        #expect(!a.confirm("first", to: "b"))
        #expect(!a.confirm("x", to: "nobody"))
        try await waitUntil { a.confirm("probe", to: "b") }
        #expect(a.offer(Self.message, to: "b"))
        #expect(a.confirm("id-1", to: "b"))
        try await waitUntil { inbox.confirmations.last == "id-1" }
        #expect(inbox.offers == [Self.message])
        #expect(inbox.frames.withLock { $0 }.contains { if case .offers(let from, _) = $0 { from == "a" } else { false } })
    }

    /// Opens a plain TCP connection that sends nothing; returns its channel.
    func silentConnection(to port: Int) async throws -> any Channel {
        try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port).get()
    }

    /// Issue 39, item 8: a connection that never shows the secret is closed at the handshake deadline.
    @Test(.timeLimit(.minutes(1))) func aSilentLinkIsClosedAtTheHandshakeDeadline() async throws {
        let b = NodeLinks(group: MultiThreadedEventLoopGroup.singleton, nodeID: "b", logger: .init(label: "b"),
                          handshakeTimeout: .milliseconds(200)) { _ in nil }
        defer { b.close() }
        let port = try b.listen(host: "127.0.0.1", port: 0)
        let silent = try await silentConnection(to: port)
        try await silent.closeFuture.get()
    }

    /// Issue 39, item 8: past the cap of links that have not shown the secret, a new one is closed at
    /// once, while those within it stay open.
    @Test(.timeLimit(.minutes(1))) func linksPastTheCapOfUnauthenticatedOnesAreClosedAtOnce() async throws {
        let b = NodeLinks(group: MultiThreadedEventLoopGroup.singleton, nodeID: "b", logger: .init(label: "b"),
                          handshakeTimeout: .hours(1), maxUnauthenticated: 2) { _ in nil }
        defer { b.close() }
        let port = try b.listen(host: "127.0.0.1", port: 0)
        let first = try await silentConnection(to: port)
        let second = try await silentConnection(to: port)
        let third = try await silentConnection(to: port)
        try await third.closeFuture.get()
        #expect(first.isActive && second.isActive)
        try await first.close()
        try await second.close()
    }

    /// Issue 39, item 8: a link whose peer does not read is not written past its high-water mark:
    /// what is posted meanwhile goes the caller's other way (NOTIFY), not into a buffer without end.
    @Test func aLinkPastItsHighWaterMarkTakesNothingMoreUntilItDrains() throws {
        let channel = EmbeddedChannel()
        let link = NodeLinks.Link(node: "b", origin: "a", eventLoop: channel.eventLoop, logger: .init(label: "a"))
        #expect(link.post(.confirmation("first")) == .connectFirst)
        link.connected(channel, hello: "hello")
        #expect(link.post(.confirmation("id-1")) == .sent)
        channel.isWritable = false
        #expect(link.post(.confirmation("id-2")) == .down)
        channel.isWritable = true
        #expect(link.post(.confirmation("id-3")) == .sent)
    }

    enum Intruder: CaseIterable {
        /// TLS with the listener's secret, then a hello with another secret.
        case wrongHello
        /// TLS with the listener's secret, then a frame longer than a link may send.
        case oversized
        /// TLS keyed by another secret: the handshake fails.
        case wrongKey
        /// No TLS at all.
        case plaintext
    }

    @Test(.timeLimit(.minutes(1)), arguments: Intruder.allCases)
    func aLinkWithoutTheSecretOrWithAnOversizedFrameIsClosedAndNothingItSentIsTaken(_ intruder: Intruder) async throws {
        let inbox = Inbox()
        let b = NodeLinks(group: MultiThreadedEventLoopGroup.singleton, nodeID: "b", logger: .init(label: "b")) { _ in nil }
        defer { b.close() }
        b.setReceiver(inbox)
        let port = try b.listen(host: "127.0.0.1", port: 0)
        let key: String? = switch intruder {
        case .wrongHello, .oversized: b.secret
        case .wrongKey: "not-the-secret"
        case .plaintext: nil
        }
        let tls = try key.map { try NodeLinkTLS.linkContext(secret: $0) }
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: nil)) }
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        var bytes = ByteBuffer()
        if intruder == .oversized {
            bytes.writeInteger(UInt32.max)  // announced, never sent: nothing is buffered for it
        } else {
            let hello = NodeLinks.hello + (intruder == .wrongHello ? "not-the-secret" : b.secret)
            bytes.writeImmutableBuffer(LinkFrames.frame(hello, allocator: channel.allocator))
            LinkFrames.writeConfirmations(["id-1"], to: &bytes)
        }
        channel.writeAndFlush(bytes, promise: nil)
        try await channel.closeFuture.get()  // B closed it
        #expect(inbox.frames.withLock { $0 }.isEmpty)
    }
}
