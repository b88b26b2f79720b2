import Foundation
import MessageJournal
import PushDomain
import Testing

private func temporaryJournal(retention: MessageJournal.Retention = .init(), wall: @escaping @Sendable () -> Int64 = { 1_000_000 })
    throws -> (MessageJournal, String) {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ccs-journal-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    let path = dir.appendingPathComponent("journal.sqlite").path
    return (try MessageJournal(path: path, retention: retention, wallMillis: wall), path)
}

private func event(_ kind: JournalEventKind, _ id: String, token: String? = "tok-A", at: Int64 = 10,
                   sender: String? = "123", api: SendAPI? = nil, client: String? = nil, detail: String? = nil) -> JournalEvent {
    JournalEvent(at: at, kind: kind, messageID: id, sender: sender, token: token, api: api, clientMessageID: client,
                 detail: detail)
}

@Suite struct MessageJournalTests {
    @Test func eventsComeBackInOrderWithEveryField() async throws {
        let (journal, _) = try temporaryJournal()
        defer { journal.shutdown() }
        journal.record(event(.handedOver, "0:1%a", at: 5))
        journal.record(event(.accepted, "0:1%a", at: 6, api: .ccs, client: "m-1"))
        journal.record(JournalEvent(at: 7, kind: .receiptSent, messageID: "0:1%a", sender: "123", token: "tok-A",
                                    topic: nil, api: nil, connection: "c7", clientMessageID: nil, detail: "é ✓"))
        journal.record(event(.refused, "local:1", token: "other", api: .legacy, detail: "Error=InvalidRegistration"))
        let events = try await journal.events(messageID: "0:1%a")
        #expect(events.map(\.kind) == [.handedOver, .accepted, .receiptSent])
        #expect(events.map(\.seq) == [1, 2, 3])
        #expect(events[1].api == .ccs && events[1].clientMessageID == "m-1" && events[1].token == "tok-A")
        #expect(events[2].connection == "c7" && events[2].detail == "é ✓" && events[2].at == 7)
        // By the id the client chose.
        #expect(try await journal.events(messageID: "m-1").map(\.messageID) == ["0:1%a", "0:1%a", "0:1%a"])
        #expect(try await journal.events(messageID: "nothing").isEmpty)
    }

    /// Events recorded while the writer waits are what wake it; a query made right after them must
    /// wait for their write (it once read "written" from the wait's empty batch, and saw nothing).
    @Test func aQueryRightAfterRecordingWhileTheWriterWaitsSeesTheEvents() async throws {
        let (journal, _) = try temporaryJournal()
        defer { journal.shutdown() }
        for round in 0..<10 {
            while !journal.figures.writerIdle { await Task.yield() }
            let id = "0:\(round)%a"
            journal.record(event(.accepted, id, api: .ccs))
            journal.record(event(.handedOver, id))
            journal.record(event(.deviceAcked, id))
            #expect(try await journal.events(messageID: id).map(\.kind) == [.accepted, .handedOver, .deviceAcked])
        }
    }

    @Test func summariesFilterAndTakeTheLatestStatus() async throws {
        let (journal, _) = try temporaryJournal()
        defer { journal.shutdown() }
        journal.record(event(.stored, "0:1%a", at: 10))
        journal.record(event(.accepted, "0:1%a", at: 11, api: .ccs))
        journal.record(event(.stored, "0:2%a", token: "tok-B", at: 20))
        journal.record(event(.collapsed, "0:1%a", at: 30))
        journal.record(event(.refused, "local:1", token: "tok-B", at: 40, sender: "999", detail: "NACK X"))
        var all = try await journal.messages(JournalFilter())
        #expect(all.map(\.messageID) == ["local:1", "0:2%a", "0:1%a"])
        #expect(all.last?.status == .collapsed && all.last?.events == 3 && all.last?.api == .ccs)
        #expect(all.last?.firstAt == 10 && all.last?.lastAt == 30 && all.last?.tokens == ["tok-A"])
        all = try await journal.messages(JournalFilter(token: "tok-B"))
        #expect(all.map(\.messageID) == ["local:1", "0:2%a"])
        #expect(try await journal.messages(JournalFilter(sender: "999")).map(\.messageID) == ["local:1"])
        #expect(try await journal.messages(JournalFilter(status: .stored)).map(\.messageID) == ["0:2%a"])
        #expect(try await journal.messages(JournalFilter(since: 25)).map(\.messageID) == ["local:1", "0:1%a"])
        #expect(try await journal.messages(JournalFilter(limit: 1)).count == 1)
        try await journal.removeAll(sender: "999")
        #expect(try await journal.messages(JournalFilter()).count == 2)
        try await journal.removeAll()
        #expect(try await journal.storedCount() == 0)
    }

    /// A message its device received and ACKed is listed as delivered, though the ACK to the app
    /// server is recorded after the device's (issue 39, item 13): a summary's status is the furthest
    /// state the message reached, in the batch that recorded them all and across batches alike.
    @Test func aSummaryShowsTheFurthestStateNotTheLatestEvent() async throws {
        let (journal, _) = try temporaryJournal()
        defer { journal.shutdown() }
        journal.record(event(.handedOver, "0:1%a", at: 10))
        journal.record(event(.deviceAcked, "0:1%a", at: 11))
        journal.record(event(.accepted, "0:1%a", at: 12, api: .ccs))
        journal.record(event(.handedOver, "0:2%a", at: 20))
        journal.record(event(.deviceAcked, "0:2%a", at: 21))
        #expect(try await journal.messages(JournalFilter()).map(\.status) == [.deviceAcked, .deviceAcked])
        // Its answer in a later batch than the device's ACK.
        journal.record(event(.accepted, "0:2%a", at: 22, api: .ccs))
        journal.record(event(.faultApplied, "0:2%a", at: 23, detail: "rule 1"))
        journal.record(event(.stored, "0:3%a", at: 30))
        journal.record(event(.accepted, "0:3%a", at: 31, api: .ccs))
        let all = try await journal.messages(JournalFilter())
        #expect(all.map(\.messageID) == ["0:3%a", "0:2%a", "0:1%a"])
        #expect(all.map(\.status) == [.accepted, .deviceAcked, .deviceAcked])
        #expect(try await journal.messages(JournalFilter(status: .deviceAcked)).map(\.messageID) == ["0:2%a", "0:1%a"])
        #expect(try await journal.messages(JournalFilter(status: .accepted)).map(\.messageID) == ["0:3%a"])
        // Further still: the receipt, the tray; and a message that expired after it was handed over.
        journal.record(event(.receiptSent, "0:1%a", at: 40))
        journal.record(event(.handedOver, "0:4%a", at: 41))
        journal.record(event(.accepted, "0:4%a", at: 42, api: .ccs))
        journal.record(event(.expired, "0:4%a", at: 43))
        let later = try await journal.messages(JournalFilter())
        #expect(later.first { $0.messageID == "0:1%a" }?.status == .receiptSent)
        #expect(later.first { $0.messageID == "0:4%a" }?.status == .expired)
    }

    @Test func retentionByCountAndByAge() async throws {
        let clock = WallStub(1_000_000)
        let (journal, _) = try temporaryJournal(retention: .init(maxEvents: 3, maxAgeMillis: 60_000), wall: { clock.now })
        defer { journal.shutdown() }
        for i in 0..<10 { journal.record(event(.stored, "0:\(i)%a")) }
        try await waitFor { try await journal.storedCount() <= 3 }
        #expect(try await journal.messages(JournalFilter()).map(\.messageID) == ["0:9%a", "0:8%a", "0:7%a"])
        clock.now += 61_000
        try await waitFor { try await journal.storedCount() == 0 }
        #expect(journal.figures.pruned >= 10)
    }

    @Test func followersSeeWhatIsRecordedAfterThey() async throws {
        let (journal, _) = try temporaryJournal()
        defer { journal.shutdown() }
        journal.record(event(.stored, "before"))
        let stream = try #require(journal.follow())
        journal.record(event(.accepted, "after"))
        var iterator = stream.makeAsyncIterator()
        let first = await iterator.next()
        #expect(first?.messageID == "after" && first?.seq == 2)
        #expect(journal.figures.followers == 1)
    }

    @Test func followersAreCappedAndEndedAtAStop() async throws {
        let (journal, _) = try temporaryJournal()
        defer { journal.shutdown() }
        var streams = (0..<MessageJournal.maximumFollowers).compactMap { _ in journal.follow() }
        #expect(streams.count == MessageJournal.maximumFollowers)
        #expect(journal.follow() == nil)
        streams.removeLast()  // its termination gives the place back
        try await waitFor { journal.follow() != nil }
        journal.endFollowers()
        var iterator = streams[0].makeAsyncIterator()
        #expect(await iterator.next() == nil)  // ended, not waiting for an event that never comes
        #expect(journal.follow() == nil)
    }

    @Test func eventsAfterASeqAreWhatAReconnectingFollowerMissed() async throws {
        let (journal, _) = try temporaryJournal()
        defer { journal.shutdown() }
        for i in 1...5 { journal.record(event(.stored, "m\(i % 2)")) }
        #expect(try await journal.events(after: 2).map(\.seq) == [3, 4, 5])
        #expect(try await journal.events(after: 0, limit: 2).map(\.seq) == [1, 2])
        #expect(try await journal.events(after: 5).isEmpty)
        #expect(try await journal.events(after: Int64.max).isEmpty)
    }

    @Test func aJournalReopensWhereItStopped() async throws {
        let (journal, path) = try temporaryJournal()
        journal.record(event(.stored, "0:1%a"))
        journal.record(event(.accepted, "0:1%a"))
        journal.shutdown()
        let again = try MessageJournal(path: path, wallMillis: { 1_000_000 })
        defer { again.shutdown() }
        again.record(event(.deviceAcked, "0:1%a"))
        #expect(try await again.events(messageID: "0:1%a").map(\.seq) == [1, 2, 3])
    }

    @Test func retentionOptionParsing() {
        #expect(MessageJournal.Retention.parse("5") == .init(maxEvents: 5, maxAgeMillis: 24 * 3_600_000))
        #expect(MessageJournal.Retention.parse("90m") == .init(maxEvents: 200_000, maxAgeMillis: 90 * 60_000))
        #expect(MessageJournal.Retention.parse("100000,7d") == .init(maxEvents: 100_000, maxAgeMillis: 7 * 86_400_000))
        #expect(MessageJournal.Retention.parse("30s,10") == .init(maxEvents: 10, maxAgeMillis: 30_000))
        for bad in ["", "0", "-1", "x", "5,6", "1h,2h", "10y", "1,2,3", "99999999999999", "4000d"] {
            #expect(MessageJournal.Retention.parse(bad) == nil, "\(bad)")
        }
    }
}

/// A wall clock the test moves.
final class WallStub: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Int64
    init(_ v: Int64) { value = v }
    var now: Int64 {
        get { lock.lock(); defer { lock.unlock() }; return value }
        set { lock.lock(); value = newValue; lock.unlock() }
    }
}

/// Polls a fact the journal's writer brings about once a second (pruning), bounded.
func waitFor(_ fact: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now.advanced(by: .seconds(20))
    while try await !fact() {
        guard ContinuousClock.now < deadline else { Issue.record("not within 20 s"); return }
        try await Task.sleep(for: .milliseconds(50))
    }
}
