import DeliveryCore
import CCSEngine
import CCSProtocol
import PushDomain
import StoreModel
import Foundation
import Locking
import Testing

@Suite struct DownstreamTests {
    @Test func unknownTokenIsBadRegistration() async throws {
        let h = try Harness()
        let outcome = await h.send(data("m1", to: "nope"))
        #expect(outcome == .nack(.invalidRegistration(token: "nope")))
    }

    @Test func anotherSendersTokenIsBadRegistration() async throws {
        let h = try Harness()
        let d = try await h.register(senders: ["111", "222"])
        #expect(await h.send(data("m1", to: d.token), from: "222") == .ack(from: d.token))
        guard case .nack(let nack) = await h.send(data("m2", to: d.token), from: "333") else {
            Issue.record("expected a NACK"); return
        }
        #expect(nack == .senderMismatch(token: d.token, sender: "333"))
    }

    @Test func ackComesOnlyAfterTheMessageIsStored() async throws {
        let h = try Harness()
        let d = try await h.register()
        let stored: Int = await withCheckedContinuation { cont in
            h.engine.downstream(data("m1", to: d.token), senderID: "111") { _ in
                cont.resume(returning: (try? h.engine.store.queuedMessages(token: d.token).count) ?? -1)
            }
        }
        #expect(stored == 1)
    }

    @Test func onlineDeviceGetsTheMessageShapedForTheApp() async throws {
        let h = try Harness()
        let d = try await h.register()
        let device = await h.connect(d.token)
        _ = await h.send(data("m1", to: d.token) { $0.collapseKey = "ck"; $0.timeToLive = 60 })
        let payload = try #require(device.payloads.first)
        #expect(payload["from"] == .string("111"))
        #expect(payload["data"] == .object(["id": .string("m1")]))
        #expect(payload["collapse_key"] == .string("ck"))
        #expect(payload["ttl"] == .int(60))
        #expect(payload["priority"] == .string("normal"))
        let id = try #require(payload["message_id"]?.stringValue)
        #expect(id.hasPrefix("0:") && id.contains("%"))
        // The device ACK removes it from the queue.
        h.engine.deviceAcknowledged(token: d.token, deviceMessageID: id)
        await h.settle()
        #expect(try h.queue(d.token).isEmpty)
    }

    @Test func unackedMessagesAreRedeliveredOnReconnect() async throws {
        let h = try Harness()
        let d = try await h.register()
        let first = await h.connect(d.token)
        _ = await h.send(data("m1", to: d.token))
        #expect(first.ids.count == 1)
        h.engine.deviceDisconnected(token: d.token, link: first)
        let second = await h.connect(d.token)
        #expect(second.ids == first.ids)
    }

    @Test func aMessageTheDeviceConfirmsBeforeItIsWrittenIsAckedAndNeverStored() async throws {
        // The live-write delay never runs out in this test: the confirmation cannot miss a window.
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let d = try await h.register()
        let device = await h.connect(d.token)
        let before = h.engine.committer.statistics.ops
        let outcome = Locked<Outcome?>(nil)
        h.engine.downstream(data("m1", to: d.token), senderID: "111") { o in outcome.withLock { $0 = o } }
        // Handed over at once, before any commit; no ACK yet.
        #expect(device.ids.count == 1)
        #expect(outcome.withLock { $0 } == nil)
        h.engine.deviceAcknowledged(token: d.token, deviceMessageID: device.ids[0])
        #expect(outcome.withLock { $0 } == .ack(from: d.token))
        await h.settle()
        #expect(try h.queue(d.token).isEmpty)
        #expect(h.engine.committer.statistics.ops == before)
    }

    @Test func aMessageWithAReceiptIsWrittenEvenWhenConfirmedAtOnce() async throws {
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let d = try await h.register()
        let device = await h.connect(d.token)
        let before = h.engine.committer.statistics
        let sent = Task { await h.send(data("r1", to: d.token) { $0.deliveryReceiptRequested = true }) }
        try await h.waitUntil { !device.ids.isEmpty }
        h.engine.deviceAcknowledged(token: d.token, deviceMessageID: device.ids[0])
        // Not called off: the write stays due (settle takes it now instead of after the delay), the ACK
        // follows its commit, and the removal commits with the receipt.
        await h.settle()
        #expect(await sent.value == .ack(from: d.token))
        await h.settle()
        let after = h.engine.committer.statistics
        #expect(after.cancellableCalledOff == before.cancellableCalledOff)
        #expect(after.cancellableCommitted == before.cancellableCommitted + 1)
        #expect(try h.queue(d.token).isEmpty)
        #expect(try h.engine.store.loadOutbound().map(\.messageID) == ["dr2:r1"])
    }

    @Test func aMessageHandedOverButNotConfirmedIsStoredAndRedelivered() async throws {
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let d = try await h.register()
        let first = await h.connect(d.token)
        let sent = Task { await h.send(data("m1", to: d.token)) }
        try await h.waitUntil { !first.ids.isEmpty }
        h.engine.deviceDisconnected(token: d.token, link: first)
        // Not confirmed: the write is taken (now, by settle's urgent read, rather than after the delay)
        // and the ACK follows the commit, as for any stored message.
        await h.settle()
        #expect(await sent.value == .ack(from: d.token))
        #expect(try h.queue(d.token).map(\.deviceMessageID) == first.ids)
        let second = await h.connect(d.token)
        #expect(second.ids == first.ids)
        // A confirmation now removes the stored copy.
        h.engine.deviceAcknowledged(token: d.token, deviceMessageID: second.ids[0])
        await h.settle()
        #expect(try h.queue(d.token).isEmpty)
    }

    @Test func anUpstreamMessageTheAppServerAcksBeforeItIsWrittenIsSentAndNeverStored() async throws {
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let d = try await h.register()
        let server = h.appServer(id: "c1")
        let before = h.engine.committer.statistics
        let outcome = Locked<UpstreamOutcome?>(nil)
        h.engine.upstream(from: d.token, UpstreamRequest(messageID: "u1", to: "111@gcm.googleapis.com")) { o in
            outcome.withLock { $0 = o }
        }
        // Out at once, before any commit; the device has no answer yet.
        #expect(server.ids == ["u1"])
        #expect(outcome.withLock { $0 } == nil)
        h.engine.appServerAcknowledged(connectionID: "c1", messageID: "u1")
        #expect(outcome.withLock { $0 } == .sent(messageID: "u1"))
        await h.settle()
        let after = h.engine.committer.statistics
        #expect(after.cancellableCalledOff == before.cancellableCalledOff + 1)
        #expect(after.ops == before.ops)
        #expect(try h.engine.store.loadOutbound().isEmpty)
    }

    @Test func anUpstreamMessageNotAckedInTimeIsSentOnItsCommitAndRemovedByTheAck() async throws {
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let d = try await h.register()
        let server = h.appServer(id: "c1")
        let sent = Task { await h.upstream(d.token, ["message_id": "u1", "to": "111@gcm.googleapis.com"]) }
        try await h.waitUntil { server.ids == ["u1"] }
        // The write is taken (settle's urgent read stands for the delay running out): `sent` follows
        // the commit, the row is stored until the app server's ACK removes it.
        await h.settle()
        #expect(await sent.value == .sent(messageID: "u1"))
        #expect(try h.engine.store.loadOutbound().map(\.messageID) == ["u1"])
        h.engine.appServerAcknowledged(connectionID: "c1", messageID: "u1")
        await h.settle()
        #expect(try h.engine.store.loadOutbound().isEmpty)
    }

    @Test func anUpstreamMessageWaitsForItsCommitWhenNoAppServerCanTakeIt() async throws {
        let h = try Harness(liveWriteDelay: .seconds(3600))
        let d = try await h.register()
        #expect(await h.upstream(d.token, ["message_id": "u1", "to": "111@gcm.googleapis.com"]) == .sent(messageID: "u1"))
        #expect(try h.engine.store.loadOutbound().map(\.messageID) == ["u1"])
        let server = h.appServer(id: "c1")
        try await h.waitUntil { server.ids == ["u1"] }
    }

    @Test func dryRunIsAckedButNeitherStoredNorDelivered() async throws {
        let h = try Harness()
        let d = try await h.register()
        let device = await h.connect(d.token)
        #expect(await h.send(data("m1", to: d.token) { $0.dryRun = true }) == .ack(from: d.token))
        await h.settle()
        #expect(device.ids.isEmpty)
        #expect(try h.queue(d.token).isEmpty)
    }

    @Test func ttlZeroIsNowOrNever() async throws {
        let h = try Harness()
        let d = try await h.register()
        #expect(await h.send(data("offline", to: d.token) { $0.timeToLive = 0 }) == .ack(from: d.token))
        #expect(try h.queue(d.token).isEmpty)
        let device = await h.connect(d.token)
        #expect(device.ids.isEmpty)
        _ = await h.send(data("online", to: d.token) { $0.timeToLive = 0 })
        #expect(device.payloads.map { $0["data"]?["id"] } == [.string("online")])
    }

    @Test func expiredMessagesAreNeverDelivered() async throws {
        let h = try Harness()
        let d = try await h.register()
        _ = await h.send(data("short", to: d.token) { $0.timeToLive = 60 })
        _ = await h.send(data("long", to: d.token) { $0.timeToLive = 2_419_200 })
        _ = try await h.engine.advanceClock(byMillis: 61_000)
        #expect(try h.queue(d.token).map(\.appMessageID) == ["long"])
        _ = try await h.engine.advanceClock(byMillis: 2_419_200_000)
        let device = await h.connect(d.token)
        #expect(device.ids.isEmpty)
    }

    @Test func collapseKeyReplacesQueuedMessage() async throws {
        let h = try Harness()
        let d = try await h.register()
        _ = await h.send(data("a", to: d.token) { $0.collapseKey = "score" })
        _ = await h.send(data("b", to: d.token) { $0.collapseKey = "score" })
        let device = await h.connect(d.token)
        #expect(device.payloads.map { $0["data"]?["id"] } == [.string("b")])
    }

    @Test func notificationsCollapseOnTheAppWithoutAKey() async throws {
        let h = try Harness()
        let d = try await h.register()
        _ = await h.send(DownstreamMessage(to: d.token, messageID: "n1", notification: ["title": "1"]))
        _ = await h.send(DownstreamMessage(to: d.token, messageID: "n2", notification: ["title": "2"]))
        #expect(try h.queue(d.token).map(\.appMessageID) == ["n2"])
    }

    @Test func moreThan100StoredMessagesAreDiscardedWithOneNotice() async throws {
        let h = try Harness()
        let d = try await h.register()
        for i in 0...100 { _ = await h.send(data("m\(i)", to: d.token)) }
        let device = await h.connect(d.token)
        let types = device.payloads.map { $0["message_type"] }
        #expect(types == [.string("deleted_messages")])
    }

    @Test func dozeHoldsNormalAndDelayWhileIdleButNotHigh() async throws {
        let h = try Harness()
        let d = try await h.register()
        let device = await h.connect(d.token)
        _ = try await h.engine.setDeviceState(token: d.token, foreground: nil, idle: true)
        _ = await h.send(data("normal", to: d.token))
        _ = await h.send(data("high", to: d.token) { $0.priority = .high })
        _ = await h.send(data("held", to: d.token) { $0.priority = .high; $0.delayWhileIdle = true })
        await h.settle()
        #expect(device.payloads.map { $0["data"]?["id"] } == [.string("high")])
        _ = try await h.engine.setDeviceState(token: d.token, foreground: nil, idle: false)
        await h.settle()
        #expect(Set(device.payloads.compactMap { $0["data"]?["id"]?.stringValue }) == ["high", "normal", "held"])
    }

    @Test func uninstalledAppGetsDeviceUnregisteredAndReinstallMakesANewToken() async throws {
        let h = try Harness()
        let d = try await h.register()
        _ = await h.send(data("m1", to: d.token))
        try await h.engine.uninstall(token: d.token)
        #expect(try h.queue(d.token).isEmpty)
        guard case .nack(let nack) = await h.send(data("m2", to: d.token)) else { Issue.record("expected NACK"); return }
        #expect(nack == .unregistered(token: d.token))
        let fresh = try await h.engine.reinstall(token: d.token)
        #expect(fresh.token != d.token)
        guard case .nack(let again) = await h.send(data("m3", to: d.token)) else { Issue.record("expected NACK"); return }
        #expect(again == .unregistered(token: d.token))
        #expect(await h.send(data("m4", to: fresh.token)) == .ack(from: fresh.token))
    }

    @Test func backgroundNotificationGoesToTheTrayAndTapHandsItOver() async throws {
        let h = try Harness()
        let d = try await h.register()
        _ = try await h.engine.setDeviceState(token: d.token, foreground: false, idle: nil)
        let device = await h.connect(d.token)
        _ = await h.send(DownstreamMessage(to: d.token, messageID: "n1", data: ["k": "v"], notification: ["title": "t"]))
        _ = await h.send(data("d1", to: d.token))
        let deliveries = device.delivered.withLock { $0 }
        #expect(deliveries.map(\.toTray) == [true, false])
        for id in device.ids { h.engine.deviceAcknowledged(token: d.token, deviceMessageID: id) }
        await h.settle()
        let tray = try h.engine.store.tray(token: d.token)
        #expect(tray.count == 1)
        let tapped = try await h.engine.tapNotification(token: d.token, deviceMessageID: tray[0].deviceMessageID)
        #expect(tapped?.payload.contains("\"k\":\"v\"") == true)
        #expect(try h.engine.store.tray(token: d.token).isEmpty)
    }
}

@Suite struct ReceiptAndUpstreamTests {
    @Test func deviceAckProducesAReceiptForTheSender() async throws {
        let h = try Harness()
        let d = try await h.register()
        let server = h.appServer(id: "c1")
        let device = await h.connect(d.token)
        _ = await h.send(data("m1", to: d.token) { $0.deliveryReceiptRequested = true })
        h.engine.deviceAcknowledged(token: d.token, deviceMessageID: device.ids[0])
        await h.settle()
        let receipt = try #require(server.sent.withLock { $0.first })
        #expect(receipt.messageID == "dr2:m1")
        let json = try JSONValue.parse(receipt.json)
        #expect(json["message_type"] == .string("receipt"))
        #expect(json["from"] == .string("gcm.googleapis.com"))
        #expect(json["data"]?["original_message_id"] == .string("m1"))
        #expect(json["data"]?["device_registration_id"] == .string(d.token))
        // ACK without the prefix is accepted too.
        h.engine.appServerAcknowledged(connectionID: "c1", messageID: "m1")
        await h.settle()
        #expect(try h.engine.store.loadOutbound().isEmpty)
    }

    @Test func upstreamGetsCategoryAndFromAndIsSpreadByFreeWindow() async throws {
        let h = try Harness()
        let d = try await h.register()
        let servers = (1...3).map { h.appServer(id: "c\($0)") }
        for i in 0..<30 {
            #expect(await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": .string("u\(i)"),
                                               "data": ["k": "v", "n": 5]]) == .sent(messageID: "u\(i)"))
        }
        await h.settle()
        #expect(servers.map { $0.ids.count } == [10, 10, 10])
        let json = try JSONValue.parse(try #require(servers[0].sent.withLock { $0.first }).json)
        #expect(json["category"] == .string("com.example.app"))
        #expect(json["from"] == .string(d.token))
        #expect(json["data"] == .object(["k": .string("v")]))
    }

    @Test func neverMoreThanTheWindowUnackedOnOneConnection() async throws {
        let h = try Harness()
        let d = try await h.register()
        let server = h.appServer(id: "c1")
        for i in 0..<150 { _ = await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": .string("u\(i)")]) }
        await h.settle()
        #expect(server.ids.count == 100)
        for id in server.ids.prefix(10) { h.engine.appServerAcknowledged(connectionID: "c1", messageID: id) }
        #expect(server.ids.count == 110)
        // An ACK on a connection that did not receive the message does nothing.
        let other = h.appServer(id: "c2")
        h.engine.appServerAcknowledged(connectionID: "c2", messageID: server.ids[20])
        #expect(other.ids.count == 40)
    }

    @Test func closingAConnectionMovesItsUnackedMessagesToAnother() async throws {
        let h = try Harness()
        let d = try await h.register()
        let a = h.appServer(id: "a")
        _ = await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": "u1"])
        await h.settle()
        #expect(a.ids == ["u1"])
        let b = h.appServer(id: "b")
        #expect(b.ids.isEmpty)
        h.engine.connectionClosed(id: "a")
        #expect(b.ids == ["u1"])
    }

    @Test func unackedMessagesAreSentAgainAfterTheAckTimeout() async throws {
        let h = try Harness(configuration: .init(ackTimeoutMillis: 5_000))
        let d = try await h.register()
        let a = h.appServer(id: "a")
        _ = await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": "u1"])
        await h.settle()
        _ = try await h.engine.advanceClock(byMillis: 4_000)
        #expect(a.ids == ["u1"])
        _ = try await h.engine.advanceClock(byMillis: 1_000)
        #expect(a.ids == ["u1", "u1"])
    }

    @Test func expiredUpstreamGivesTheDeviceASendError() async throws {
        let h = try Harness()
        let d = try await h.register()
        let device = await h.connect(d.token)
        _ = await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": "u1", "time_to_live": 10])
        _ = try await h.engine.advanceClock(byMillis: 10_000)
        await h.settle()
        let notice = try #require(device.payloads.first)
        #expect(notice["message_type"] == .string("send_error"))
        #expect(notice["message_id"] == .string("u1"))
        #expect(try h.engine.store.loadOutbound().isEmpty)
    }


    /// The tick reads a sender's queue only once something in it may have expired: a message that
    /// joins a queue whose first expiry is known (here u1's, an hour away) lowers it, and expires on
    /// time; a message put back at the front after the ACK timeout does too.
    @Test func aShorterLivedUpstreamMessageExpiresOnTimeBehindALongerLivedOne() async throws {
        let h = try Harness(configuration: .init(ackTimeoutMillis: 5_000))
        let d = try await h.register()
        let device = await h.connect(d.token)
        _ = await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": "u1", "time_to_live": 3_600])
        _ = try await h.engine.advanceClock(byMillis: 1_000)  // the tick learns u1's expiry
        _ = await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": "u2", "time_to_live": 10])
        _ = try await h.engine.advanceClock(byMillis: 10_000)
        await h.settle()
        #expect(device.payloads.map { $0["message_id"] } == [.string("u2")])
        #expect(device.payloads.first?["message_type"] == .string("send_error"))
        #expect(try h.engine.store.loadOutbound().map(\.messageID) == ["u1"])

        // Sent, not ACKed within the timeout, back at the front of the queue: still expires on time.
        let a = h.appServer(id: "a")
        _ = await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": "u3", "time_to_live": 8])
        await h.settle()
        #expect(a.ids == ["u1", "u3"])
        h.engine.connectionClosed(id: "a")  // both back in the queue, no connection to take them
        _ = try await h.engine.advanceClock(byMillis: 8_000)
        await h.settle()
        #expect(device.payloads.compactMap { $0["message_id"] } == [.string("u2"), .string("u3")])
        #expect(try h.engine.store.loadOutbound().map(\.messageID) == ["u1"])
    }
    @Test func upstreamErrors() async throws {
        let h = try Harness()
        let d = try await h.register()
        #expect(await h.upstream(d.token, ["to": "999@gcm.googleapis.com", "message_id": "x"])
                == .sendError(messageID: "x", error: .invalidSender))
        _ = await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": "dup"])
        #expect(await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": "dup"])
                == .sendError(messageID: "dup", error: .duplicateMessageID))
    }

    @Test func pendingOutboundSurvivesARestart() async throws {
        let store = Harness.newStore()
        let token: String
        do {
            let h = try Harness(store: store)
            token = try await h.register().token
            _ = await h.upstream(token, ["to": "111@gcm.googleapis.com", "message_id": "u1"])
            await h.engine.committer.shutdown()
        }
        let h = try Harness(store: store)
        let server = h.appServer(id: "c")
        #expect(server.ids == ["u1"])
        #expect(h.engine.device(token: token) != nil)
    }
}

@Suite struct AuthenticationTests {
    @Test func aRefusedLoginSaysWhy() throws {
        let permissive = try Harness()
        #expect(permissive.engine.checkAppServer(senderID: "abc", key: "k")
                == .refused(reason: "the user name must be a sender ID (1 to 32 digits, optionally followed by @gcm.googleapis.com); got \"abc\""))
        #expect(permissive.engine.checkAppServer(senderID: "123", key: "")
                == .refused(reason: "the password (the server key) is empty for sender 123"))
        let strict = try Harness(configuration: .init(authMode: .strict, configuredSenders: ["123": "secret"]))
        #expect(strict.engine.checkAppServer(senderID: "123", key: "other")
                == .refused(reason: "wrong server key for sender 123 (--auth strict)"))
        #expect(strict.engine.checkAppServer(senderID: "456", key: "secret")
                == .refused(reason: "sender 456 is not in the --config file (--auth strict)"))
    }

    @Test func permissiveAcceptsNumericSendersWithAnyKey() throws {
        let h = try Harness()
        #expect(h.engine.authenticateAppServer(senderID: "123", key: "k"))
        #expect(!h.engine.authenticateAppServer(senderID: "abc", key: "k"))
        #expect(!h.engine.authenticateAppServer(senderID: "123", key: ""))
    }

    @Test func strictAcceptsOnlyConfiguredPairs() async throws {
        let h = try Harness(configuration: .init(authMode: .strict, configuredSenders: ["123": "secret"]))
        #expect(h.engine.authenticateAppServer(senderID: "123", key: "secret"))
        #expect(!h.engine.authenticateAppServer(senderID: "123", key: "other"))
        #expect(!h.engine.authenticateAppServer(senderID: "456", key: "secret"))
        await #expect(throws: DeviceManagementError.unknownSender("456")) {
            try await h.engine.registerDevice(app: "a", senders: ["456"], platform: .android)
        }
    }

    @Test func deviceCredentialsAreNotTheSendersKey() async throws {
        let h = try Harness()
        let d = try await h.register()
        #expect(h.engine.authenticateDevice(deviceID: d.deviceID, secret: d.secret)?.token == d.token)
        #expect(h.engine.authenticateDevice(deviceID: d.deviceID, secret: "wrong") == nil)
        try await h.engine.uninstall(token: d.token)
        #expect(h.engine.authenticateDevice(deviceID: d.deviceID, secret: d.secret) == nil)
    }
}

@Suite struct IOSDeliveryTests {
    @Test func iosDataMessagesWaitForTheForeground() async throws {
        let h = try Harness()
        let d = try await h.engine.registerDevice(app: "com.example.ios", senders: ["111"], platform: .ios)
        _ = try await h.engine.setDeviceState(token: d.token, foreground: false, idle: nil)
        let device = await h.connect(d.token)
        _ = await h.send(data("data", to: d.token))
        _ = await h.send(DownstreamMessage(to: d.token, messageID: "n", notification: ["title": "t"]))
        await h.settle()
        #expect(device.delivered.withLock { $0.map(\.message.appMessageID) } == ["n"])
        _ = try await h.engine.setDeviceState(token: d.token, foreground: true, idle: nil)
        await h.settle()
        #expect(device.delivered.withLock { $0.map(\.message.appMessageID) } == ["n", "data"])
    }

    @Test func contentAvailableWakesABackgroundedApp() async throws {
        let h = try Harness()
        let d = try await h.engine.registerDevice(app: "com.example.ios", senders: ["111"], platform: .ios)
        _ = try await h.engine.setDeviceState(token: d.token, foreground: false, idle: nil)
        let device = await h.connect(d.token)
        _ = await h.send(data("plain", to: d.token))
        _ = await h.send(data("wake", to: d.token) { $0.contentAvailable = true })
        await h.settle()
        #expect(device.delivered.withLock { $0.map(\.message.appMessageID) } == ["wake"])
        let view = try #require(device.delivered.withLock { $0.first?.view }.flatMap { try? JSONValue.parse($0) })
        #expect(view["wakes_app"] == .bool(true))
        #expect(view["headers"]?["apns-push-type"] == .string("background"))
        #expect(view["headers"]?["apns-priority"] == .string("5"))
    }

    @Test func eachDeliveryCarriesTheIOSPayload() async throws {
        let h = try Harness()
        let d = try await h.engine.registerDevice(app: "com.example.ios", senders: ["111"], platform: .ios)
        let device = await h.connect(d.token)
        _ = await h.send(DownstreamMessage(to: d.token, messageID: "n", data: ["k": "v"],
                                           notification: ["title": "t", "badge": "2"]))
        let delivery = try #require(device.delivered.withLock { $0.first })
        let view = try #require(delivery.view.flatMap { try? JSONValue.parse($0) })
        #expect(view["platform"] == .string("ios"))
        #expect(view["payload"]?["aps"]?["alert"]?["title"] == .string("t"))
        #expect(view["payload"]?["aps"]?["badge"] == .int(2))
        #expect(view["payload"]?["k"] == .string("v"))
        #expect(view["payload"]?["gcm.message_id"] == .string(delivery.message.deviceMessageID))
        #expect(view["headers"]?["apns-topic"] == .string("com.example.ios"))
    }

    @Test func aPayloadOverAPNsLimitIsRefusedForIOSOnly() async throws {
        let h = try Harness()
        let ios = try await h.engine.registerDevice(app: "com.example.ios", senders: ["111"], platform: .ios)
        let android = try await h.register()
        // Under FCM's 4096 data bytes, over APNs's 4096 once aps, gcm.message_id and JSON quoting are added.
        let big = String(repeating: "\"", count: 2100)
        let m = { (to: String) in DownstreamMessage(to: to, messageID: "big", data: ["k": big]) }
        guard case .nack(.messageTooBig(let token, let bytes)) = await h.send(m(ios.token)) else {
            Issue.record("expected messageTooBig"); return
        }
        #expect(token == ios.token)
        #expect(bytes > 4096)
        #expect(await h.send(m(android.token)) == .ack(from: android.token))
        #expect(try h.queue(ios.token).isEmpty)
    }
}

@Suite struct WebDeviceTests {
    static let subscription = WebPushSubscription(
        endpoint: "https://fcm.googleapis.com/fcm/send/abc",
        p256dh: "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM",
        auth: "tBHItJI5svbpez7KI4CCXg")

    @Test func aWebDeviceNeedsASubscriptionAndOnlyItMayHaveOne() async throws {
        let h = try Harness()
        await #expect(throws: DeviceManagementError.self) {
            try await h.engine.registerDevice(app: "1:111:web:abc", senders: ["111"], platform: .web)
        }
        await #expect(throws: DeviceManagementError.self) {
            try await h.engine.registerDevice(app: "com.example.app", senders: ["111"], platform: .android,
                                              webSubscription: Self.subscription)
        }
        let d = try await h.engine.registerDevice(app: "1:111:web:abc", senders: ["111"], platform: .web,
                                                  webSubscription: Self.subscription)
        #expect(try h.engine.store.loadDevices().first { $0.token == d.token }?.webSubscription == Self.subscription)
        let again = try await h.engine.reinstall(token: d.token)
        #expect(again.webSubscription == Self.subscription)
    }

    @Test func aWebDeviceSeesTheWebpushView() async throws {
        let h = try Harness()
        let d = try await h.engine.registerDevice(app: "1:111:web:abc", senders: ["111"], platform: .web,
                                                  webSubscription: Self.subscription)
        _ = try await h.engine.setDeviceState(token: d.token, foreground: false, idle: nil)
        let device = await h.connect(d.token)
        _ = await h.send(DownstreamMessage(to: d.token, messageID: "n", timeToLive: 60,
                                           notification: ["title": "t", "image": "https://i/x.png"]))
        let delivery = try #require(device.delivered.withLock { $0.first })
        #expect(delivery.toTray)
        let view = try #require(delivery.view.flatMap { try? JSONValue.parse($0) })
        #expect(view["notification"]?["title"] == .string("t"))
        #expect(view["image"] == .string("https://i/x.png"))
        #expect(view["headers"]?["TTL"] == .string("60"))
        #expect(view["presentation"] == .string("system"))
    }
}

@Suite struct OutboundBoundTests {
    @Test func anAppServerThatNeverAcksCannotGrowThePendingQueueWithoutBound() async throws {
        let h = try Harness(configuration: .init(maxUnackedOutbound: 2, maxPendingOutboundPerSender: 5))
        let d = try await h.register()
        let server = h.appServer(id: "silent")
        let device = await h.connect(d.token)
        for i in 0..<10 { _ = await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": .string("u\(i)")]) }
        await h.settle()
        #expect(server.ids == ["u0", "u1"])
        let pending = h.engine.outbound().filter { $0.connectionID == nil }
        #expect(pending.map(\.messageID) == ["u5", "u6", "u7", "u8", "u9"])
        // The dropped ones are reported to the device as failed sends.
        #expect(Set(device.payloads.compactMap { $0["message_id"]?.stringValue }) == ["u2", "u3", "u4"])
    }
}

@Suite struct RestartTests {
    @Test func reinstallingTheSameOldInstallationTwiceIsRefused() async throws {
        let h = try Harness()
        let d = try await h.register()
        _ = try await h.engine.reinstall(token: d.token)
        await #expect(throws: DeviceManagementError.self) { try await h.engine.reinstall(token: d.token) }
    }

    @Test func messageIDsStayUniqueAcrossARestartWithAStoppedVirtualClock() async throws {
        let store = Harness.newStore()
        let token: String
        do {
            let h = try Harness(store: store)
            token = try await h.register().token
            for i in 0..<3 { _ = await h.send(data("a\(i)", to: token)) }
            await h.engine.committer.shutdown()
        }
        let h = try Harness(store: store)  // same virtual start time
        for i in 0..<3 { _ = await h.send(data("b\(i)", to: token)) }
        #expect(try h.queue(token).count == 6)
    }
}
