import Foundation
@testable import MessageJournal
import Testing

/// `journal_token` and the writer's map of token numbers stay bounded while devices come and go.
@Suite struct JournalTokenTests {
    private func database(cachedTokens: Int, forgetEvery: Int) throws -> JournalDatabase {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ccs-journal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return try JournalDatabase(path: dir.appendingPathComponent("journal.sqlite").path, cachedTokens: cachedTokens,
                                   forgetUnusedTokensEvery: forgetEvery)
    }

    private func batch(tokens: Range<Int>, firstSeq: Int64) -> EncodedEvents {
        var events = EncodedEvents()
        for (i, n) in tokens.enumerated() {
            var e = JournalEvent(at: 10, kind: .handedOver, messageID: "0:\(n)%a", sender: "123", token: "tok-\(n)")
            e.seq = firstSeq + Int64(i)
            events.append(e)
        }
        return events
    }

    @Test func tokensNoEntryNamesAreForgottenOnceEnoughCame() throws {
        let db = try database(cachedTokens: 4, forgetEvery: 5)
        try db.insert(batch(tokens: 0..<3, firstSeq: 1), recordedAt: 10)
        _ = try db.prune(keeping: 1, olderThan: 0)  // keeps tok-2's entry; 3 new tokens < 5
        #expect(try db.tokenCount() == 3)
        try db.insert(batch(tokens: 3..<6, firstSeq: 4), recordedAt: 10)
        _ = try db.prune(keeping: 1, olderThan: 0)  // 6 new tokens: those without an entry go
        #expect(try db.tokenCount() == 1)
        // The entry kept still reads its token, and tokens seen again get numbers again.
        #expect(try db.events(messageID: "0:5%a").map(\.token) == ["tok-5"])
        try db.insert(batch(tokens: 0..<8, firstSeq: 7), recordedAt: 10)  // more than the map holds
        #expect(try db.tokenCount() == 8)
        #expect(try (0..<8).map { try db.events(messageID: "0:\($0)%a").last?.token } == (0..<8).map { "tok-\($0)" })
    }

    @Test func removingEverythingForgetsTheTokens() throws {
        let db = try database(cachedTokens: 100, forgetEvery: 1000)
        try db.insert(batch(tokens: 0..<3, firstSeq: 1), recordedAt: 10)
        try db.removeAll()
        #expect(try db.tokenCount() == 0)
        try db.insert(batch(tokens: 1..<2, firstSeq: 4), recordedAt: 10)
        #expect(try db.events(messageID: "0:1%a").map(\.token) == ["tok-1"])
    }
}
