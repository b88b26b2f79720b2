import StoreModel
import Foundation
import Locking
import PushDomain
import Testing

@Suite struct SnapshotAndRemovalTests {
    @Test(arguments: Backend.available) func anExportImportedElsewhereExportsTheSameText(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
        try store.apply([.enqueue(message("t", "a", collapseKey: "k"), limits: limits), .enqueue(message("u", "b"), limits: nil),
                         .setMeta(key: "virtual_clock_ms", value: "42"),
                         .subscribe([TopicSubscription(senderID: "1", topic: "news", token: "t", addedAt: 5)])])
        let text = try store.exportSnapshot()
        #expect(text.hasPrefix(#"{"format":"ccs-emulator-export","version":1,"schema":"#))
        let other = try temporaryStore(backend, devices: ["zzz"])
        try other.importSnapshot(text)
        #expect(try other.exportSnapshot() == text)
        #expect(try other.queuedMessages(token: "t").map(\.deviceMessageID) == ["a"])
        #expect(try other.meta("virtual_clock_ms") == "42")
        #expect(try other.loadDevices().map(\.token).sorted() == ["bad", "h", "t", "u"])
    }

    /// The backends share tables, columns, row order and schema name: an export moves between them.
    @Test(.enabled(if: Backend.postgresURL != nil, "needs CCS_TEST_POSTGRES_URL"))
    func anExportFromSQLiteImportsIntoPostgreSQLAndBack() throws {
        let sqlite = try temporaryStore(.sqlite)
        var m = message("t", "a", collapseKey: "k")
        m.platformBlocks = #"{"android":{"priority":"high"}}"#
        m.deliveryReceiptRequested = true
        try sqlite.apply([.enqueue(m, limits: limits), .enqueue(message("u", "b"), limits: nil),
                          .enqueue(message("u", "é", kind: .deletedMessages), limits: nil),
                          .setMeta(key: "virtual_clock_ms", value: "42"),
                          .addOutbound(OutboundRecord(senderID: "1", kind: .receipt, messageID: "dr2:x", token: "t", json: "{}",
                                                      createdAt: 1, expiresAt: 2, aboutMessageID: "a")),
                          .addToTray(TrayEntry(token: "t", deviceMessageID: "Z", payload: "{}", shownAt: 5, view: nil)),
                          .addToTray(TrayEntry(token: "t", deviceMessageID: "a", payload: "{}", shownAt: 5, view: "{}")),
                          .upsertDeviceGroup(DeviceGroupRecord(id: "g", senderID: "1", name: "n", members: ["t", "u"], createdAt: 3)),
                          .addAPNsFeedback(APNsFeedbackRecord(bundleID: "b", deviceToken: "00", timestamp: 9)),
                          .subscribe([TopicSubscription(senderID: "1", topic: "news", token: "t", addedAt: 5)]),
                          .fanOut(FanOut(audience: .subscribers(senderID: "1", topic: "news"), message: message("", "f"),
                                         limits: limits))])
        let text = try sqlite.exportSnapshot()
        let postgres = try temporaryStore(.postgres, devices: ["zzz"])
        try postgres.importSnapshot(text)
        #expect(try postgres.exportSnapshot() == text)
        #expect(try postgres.queuedMessages(token: "t") == sqlite.queuedMessages(token: "t"))
        // New rows after the import take keys past the imported ones.
        try postgres.apply([.upsertDevice(device("new")), .enqueue(message("new", "n"), limits: nil)])
        #expect(try postgres.queuedMessages(token: "new").map(\.deviceMessageID) == ["n"])
        let back = try temporaryStore(.sqlite, devices: [])
        try back.importSnapshot(try postgres.exportSnapshot())
        #expect(try back.exportSnapshot() == postgres.exportSnapshot())
    }

    @Test(arguments: Backend.available) func badExportsAreRefusedAndChangeNothing(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
        let good = try store.exportSnapshot()
        for bad in ["{", #"{"format":"x","version":1}"#, #"{"format":"ccs-emulator-export","version":2}"#,
                    good.replacingOccurrences(of: #""tables":{"#, with: #""tables":{"nope":[],"#),
                    good.replacingOccurrences(of: #""token":"t""#, with: #""token":"t","extra":1"#)] {
            #expect(throws: StoreSnapshot.ImportError.self) { try store.importSnapshot(bad) }
        }
        #expect(try store.exportSnapshot() == good)
    }

    @Test(arguments: Backend.available) func removalsAreReportedAfterTheCommit(_ backend: Backend) throws {
        let store = try temporaryStore(backend)
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
