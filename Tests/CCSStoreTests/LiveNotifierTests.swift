import CCSStore
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
