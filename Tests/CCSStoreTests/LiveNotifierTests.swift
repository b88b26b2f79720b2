import CCSStore
import Locking
import NIOCore
import NIOPosix
@testable import PostgresStore
import Testing

/// The payloads nodes exchange before a write (docs/scaling.md): packed under PostgreSQL's limit,
/// read back line for line, and the offered message read by the same reader as `ccs_enqueue`'s.
@Suite struct LiveNotifierTests {
    @Test func linesArePackedPerChannelAndHeaderUnderTheLimitAndReadBack() throws {
        let line = String(repeating: "x", count: 3_000)
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
        #expect(payloads.allSatisfy { $0.utf8.count <= LiveNotifier.payloadLimit })
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

    @Test func anOfferedMessageIsReadLikeACommittedOnesAnnouncement() throws {
        let m = QueuedMessage(token: "t:1", deviceMessageID: "0:1%ab", senderID: "111", appMessageID: "m \"1\"\n",
                              collapseKey: "k", priority: "high", timeToLive: 60, enqueuedAt: 1_000, expiresAt: 61_000,
                              deliveryReceiptRequested: false, delayWhileIdle: true, isNotification: true,
                              payload: #"{"data":{"a":"é\n"}}"#, platformBlocks: #"{"android":{}}"#)
        let line = LiveNotifier.line(m)
        #expect(!line.contains("\n"))
        #expect(PostgresCluster.message(fromAnnouncement: line) == m)
        var plain = m
        plain.collapseKey = nil
        plain.platformBlocks = nil
        #expect(PostgresCluster.message(fromAnnouncement: LiveNotifier.line(plain)) == plain)
    }
}

/// The direct links between nodes, over loopback: frames arrive whole and in order, and a link that
/// does not know the listener's secret is closed before anything it sends is taken.
@Suite struct NodeLinksTests {
    final class Inbox: NodeLinkReceiver {
        let payloads = Locked<[String]>([])
        func linkReceived(_ payload: String) { payloads.withLock { $0.append(payload) } }
    }

    func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        while !condition() {
            guard ContinuousClock.now < deadline else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    @Test func linesPostedToANodeArriveAsFramesOnceItsLinkIsUp() async throws {
        let inbox = Inbox()
        let endpoint = Locked<NodeLinks.Endpoint?>(nil)
        let b = NodeLinks(group: MultiThreadedEventLoopGroup.singleton, logger: .init(label: "b")) { _ in nil }
        let a = NodeLinks(group: MultiThreadedEventLoopGroup.singleton, logger: .init(label: "a")) { node in node == "b" ? endpoint.withLock { $0 } : nil }
        defer { a.close(); b.close() }
        b.setReceiver(inbox)
        let port = try b.listen(host: "127.0.0.1", port: 0)
        endpoint.withLock { $0 = .init(host: "127.0.0.1", port: port, secret: b.secret) }
        // The first line starts the link and goes the caller's other way; posting goes on until one is taken.
        #expect(!a.post("first", header: .confirmation, to: "b"))
        #expect(!a.post("x", header: .confirmation, to: "nobody"))
        try await waitUntil { a.post("probe", header: .confirmation, to: "b") }
        #expect(a.post(#"{"token":"t"}"#, header: .offer(from: "a"), to: "b"))
        #expect(a.post("id-1", header: .confirmation, to: "b"))
        try await waitUntil { inbox.payloads.withLock { $0.contains { $0.hasPrefix("\nL a") } } }
        let read = inbox.payloads.withLock { $0 }.compactMap(LiveNotifier.Header.parse)
        #expect(read.contains { $0.0 == .offer(from: "a") && $0.1 == [#"{"token":"t"}"#] })
        #expect(read.filter { $0.0 == .confirmation }.flatMap(\.1).last == "id-1")
    }

    @Test(arguments: [false, true])
    func aLinkWithoutTheSecretOrWithAnOversizedFrameIsClosedAndNothingItSentIsTaken(oversized: Bool) async throws {
        let inbox = Inbox()
        let b = NodeLinks(group: MultiThreadedEventLoopGroup.singleton, logger: .init(label: "b")) { _ in nil }
        defer { b.close() }
        b.setReceiver(inbox)
        let port = try b.listen(host: "127.0.0.1", port: 0)
        let group = MultiThreadedEventLoopGroup.singleton
        let channel = try await ClientBootstrap(group: group).connect(host: "127.0.0.1", port: port).get()
        var bytes = ByteBuffer()
        if oversized {
            bytes.writeInteger(UInt32.max)  // announced, never sent: nothing is buffered for it
        } else {
            bytes.writeImmutableBuffer(LinkFrameDecoder.frame(NodeLinks.hello + "not-the-secret", allocator: channel.allocator))
            bytes.writeImmutableBuffer(LinkFrameDecoder.frame("\nC\nid-1", allocator: channel.allocator))
        }
        try await channel.writeAndFlush(bytes)
        try await channel.closeFuture.get()  // B closed it
        #expect(inbox.payloads.withLock { $0 }.isEmpty)
    }
}
