import CCSStore
import Foundation
import Locking
import PushDomain
import Testing

@Suite struct SnapshotAndRemovalTests {
    @Test func anExportImportedElsewhereExportsTheSameText() throws {
        let store = try temporaryStore()
        try store.apply([.enqueue(message("t", "a", collapseKey: "k"), limits: limits), .enqueue(message("u", "b"), limits: nil),
                         .setMeta(key: "virtual_clock_ms", value: "42"),
                         .subscribe([TopicSubscription(senderID: "1", topic: "news", token: "t", addedAt: 5)])])
        let text = try store.exportSnapshot()
        #expect(text.hasPrefix(#"{"format":"ccs-emulator-export","version":1,"schema":"#))
        let other = try temporaryStore(devices: ["zzz"])
        try other.importSnapshot(text)
        #expect(try other.exportSnapshot() == text)
        #expect(try other.queuedMessages(token: "t").map(\.deviceMessageID) == ["a"])
        #expect(try other.meta("virtual_clock_ms") == "42")
        #expect(try other.loadDevices().map(\.token).sorted() == ["bad", "h", "t", "u"])
    }

    @Test func badExportsAreRefusedAndChangeNothing() throws {
        let store = try temporaryStore()
        let good = try store.exportSnapshot()
        for bad in ["{", #"{"format":"x","version":1}"#, #"{"format":"ccs-emulator-export","version":2}"#,
                    good.replacingOccurrences(of: #""tables":{"#, with: #""tables":{"nope":[],"#),
                    good.replacingOccurrences(of: #""token":"t""#, with: #""token":"t","extra":1"#)] {
            #expect(throws: StoreSnapshot.ImportError.self) { try store.importSnapshot(bad) }
        }
        #expect(try store.exportSnapshot() == good)
    }

    @Test func removalsAreReportedAfterTheCommit() throws {
        let store = try temporaryStore()
        let seen = Locked<[QueueRemoval]>([])
        store.observeRemovals { removals in seen.withLock { $0 += removals } }
        try store.apply([.enqueue(message("t", "old", collapseKey: "k"), limits: limits)])
        try store.apply([.enqueue(message("t", "new", collapseKey: "k"), limits: limits)])
        try store.apply([.enqueue(message("u", "short", expiresAt: 5), limits: nil), .removeExpired(now: 6)])
        let small = QueueLimits(maxCollapseKeys: 4, maxNonCollapsible: 1, overflowNotice: message("h", "notice", kind: .deletedMessages))
        try store.apply([.enqueue(message("h", "first"), limits: small)])
        try store.apply([.enqueue(message("h", "second"), limits: small)])
        let got = seen.withLock { $0 }.map { "\($0.token) \($0.deviceMessageID) \($0.reason.rawValue) \($0.onArrival)" }
        #expect(got == ["t old collapsed false", "u short expired false", "h second discarded true", "h first discarded false"])
        // A transaction that fails reports nothing.
        store.injectFailures { _ in true }
        #expect(throws: (any Error).self) { try store.apply([.enqueue(message("t", "newer", collapseKey: "k"), limits: limits)]) }
        #expect(seen.withLock { $0.count } == 4)
    }
}
