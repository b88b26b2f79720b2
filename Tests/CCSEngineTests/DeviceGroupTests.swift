@testable import CCSEngine
import DeliveryCore
import CCSProtocol
import PushDomain
import StoreModel
import Foundation
import Testing

/// The rules of device groups as a value (`DeviceGroupRegistry.plan`), and the engine's group
/// management, sends and upstream on a real store.
@Suite struct DeviceGroupRegistryTests {
    static let ids = (0..<100).map { String(format: "%032x", $0) }

    func make(_ records: [DeviceGroupRecord] = []) -> DeviceGroupRegistry { DeviceGroupRegistry(records) }

    func plan(_ r: DeviceGroupRegistry, _ op: DeviceGroupOperation, sender: String = "1",
              canJoin: (String) -> Bool = { !$0.hasPrefix("bad") }) -> Result<DeviceGroupChange, DeviceGroupError> {
        r.plan(op, sender: sender, now: 5, newID: { Self.ids[1] }, canJoin: canJoin)
    }

    @Test func createDropsTokensThatCannotJoinAndRefusesWhenNoneCan() {
        let r = make()
        #expect(plan(r, .create(name: "n", tokens: ["a", "bad1", "a", "b"]))
            == .success(.save(DeviceGroupRecord(id: Self.ids[1], senderID: "1", name: "n", members: ["a", "b"], createdAt: 5))))
        #expect(plan(r, .create(name: "n", tokens: ["bad1", "bad2"])) == .failure(.noValidRegistrationIDs))
        #expect(plan(r, .create(name: "n", tokens: [])) == .failure(.noValidRegistrationIDs))
    }

    @Test func namesAreUniquePerSender() {
        let g = DeviceGroupRecord(id: Self.ids[2], senderID: "1", name: "n", members: ["a"], createdAt: 0)
        let r = make([g])
        #expect(plan(r, .create(name: "n", tokens: ["b"])) == .failure(.alreadyExists))
        // Another sender may use the name.
        if case .success(.save(let other)) = plan(r, .create(name: "n", tokens: ["b"]), sender: "2") {
            #expect(other.senderID == "2")
        } else { Issue.record("another sender's create was refused") }
    }

    @Test func twentyMembersAtMost() {
        let twenty = (0..<20).map { "t\($0)" }
        #expect(plan(make(), .create(name: "n", tokens: twenty + ["t20"])) == .failure(.tooManyMembers(limit: 20)))
        guard case .success(.save(let g)) = plan(make(), .create(name: "n", tokens: twenty)) else {
            Issue.record("20 members refused"); return
        }
        let r = make([g])
        let key = NotificationKey.make(groupID: g.id)
        #expect(plan(r, .add(key: key, name: nil, tokens: ["t20"])) == .failure(.tooManyMembers(limit: 20)))
        // Adding members it already has changes nothing and is no error.
        #expect(plan(r, .add(key: key, name: nil, tokens: ["t3"])) == .success(.save(g)))
    }

    @Test func addAndRemoveCheckTheKeyTheNameAndTheTokens() {
        let g = DeviceGroupRecord(id: Self.ids[3], senderID: "1", name: "n", members: ["a", "b"], createdAt: 0)
        let r = make([g])
        let key = NotificationKey.make(groupID: g.id)
        #expect(plan(r, .add(key: "APA91bnot-a-key", name: nil, tokens: ["c"])) == .failure(.notFound))
        #expect(plan(r, .add(key: NotificationKey.make(groupID: Self.ids[4]), name: nil, tokens: ["c"])) == .failure(.notFound))
        #expect(plan(r, .add(key: key, name: nil, tokens: ["c"]), sender: "2") == .failure(.notFound))
        #expect(plan(r, .add(key: key, name: "other", tokens: ["c"])) == .failure(.nameMismatch))
        #expect(plan(r, .add(key: key, name: "n", tokens: ["bad"])) == .failure(.noValidRegistrationIDs))
        var added = g
        added.members = ["a", "b", "c"]
        #expect(plan(r, .add(key: key, name: "n", tokens: ["c", "bad"])) == .success(.save(added)))
        #expect(plan(r, .remove(key: key, name: nil, tokens: ["zzz"])) == .failure(.noValidRegistrationIDs))
        #expect(plan(r, .remove(key: key, name: "x", tokens: ["a"])) == .failure(.nameMismatch))
        var removed = g
        removed.members = ["b"]
        #expect(plan(r, .remove(key: key, name: nil, tokens: ["a", "zzz"])) == .success(.save(removed)))
        // The last member removed deletes the group.
        var emptied = g
        emptied.members = []
        #expect(plan(r, .remove(key: key, name: "n", tokens: ["a", "b"])) == .success(.delete(emptied)))
    }

    @Test func applyKeepsTheIndexesInStep() {
        var r = make()
        let g = DeviceGroupRecord(id: Self.ids[5], senderID: "1", name: "n", members: ["a", "b"], createdAt: 0)
        r.apply(.save(g))
        #expect(r.groups(token: "a").map(\.id) == [g.id])
        #expect(r.group(name: "n", sender: "1") == g)
        var renamed = g
        renamed.members = ["b"]
        r.apply(.save(renamed))
        #expect(r.groups(token: "a").isEmpty)
        r.restore(g, id: g.id)
        #expect(r.groups(token: "a").map(\.id) == [g.id])
        r.apply(.delete(g))
        #expect(r.group(name: "n", sender: "1") == nil && r.groups(token: "b").isEmpty && r.byID.isEmpty)
    }

    @Test func pruningLeavesAnEmptyGroup() {
        let g = DeviceGroupRecord(id: Self.ids[6], senderID: "1", name: "n", members: ["a", "b"], createdAt: 0)
        let r = make([g])
        #expect(r.pruning(["zzz"], fromGroup: g.id) == nil)
        #expect(r.pruning(["a", "b"], fromGroup: g.id)?.members == [])
    }
}

@Suite struct NotificationKeyTests {
    @Test func everyEncodingDecodesToTheGroupAndLooksLikeAKey() {
        let id = NotificationKey.newGroupID()
        let a = NotificationKey.make(groupID: id), b = NotificationKey.make(groupID: id)
        #expect(a != b)
        for key in [a, b] {
            #expect(key.hasPrefix("APA91b") && key.count == NotificationKey.length)
            #expect(NotificationKey.groupID(of: key) == id)
            #expect(!key.contains(":"))
        }
    }

    @Test func tokensAndDamagedKeysAreNoKeys() {
        let key = NotificationKey.make(groupID: NotificationKey.newGroupID())
        var damaged = Array(key)
        damaged[40] = damaged[40] == "A" ? "B" : "A"
        for s in [RegistrationToken.make(instanceID: RegistrationToken.makeInstanceID()), String(damaged),
                  String(key.dropLast()), key + "A", "", "APA91b", String(key.dropLast(4)) + "====", "/topics/x"] {
            #expect(NotificationKey.groupID(of: s) == nil, "\(s)")
        }
    }
}

@Suite struct DeviceGroupEngineTests {
    func create(_ h: Harness, _ name: String, _ tokens: [String], sender: String = "111") async throws -> String {
        try await h.engine.manageDeviceGroup(sender: sender, .create(name: name, tokens: tokens))
    }

    /// A message to `key` as `.token` (how CCS and legacy `to` reach the engine): the group's outcome.
    func sendGroup(_ h: Harness, _ key: String, _ message: Message, from sender: String = "111") async -> GroupSendOutcome? {
        let results: [SendResult] = await withCheckedContinuation { c in
            h.engine.send(SendRequest(sender: sender, target: .token(key), message: message)) { c.resume(returning: $0) }
        }
        if case .group(let o)? = results.first { return o }
        return nil
    }

    func message(_ id: String, _ extra: (inout Message) -> Void = { _ in }) -> Message {
        var m = Message(messageID: id, data: ["id": id])
        extra(&m)
        return m
    }

    @Test func membersMustBeInstalledTokensOfTheSender() async throws {
        let h = try Harness()
        let mine = try await h.register()
        let other = try await h.register(senders: ["222"])
        let gone = try await h.register()
        try await h.engine.uninstall(token: gone.token)
        let key = try await create(h, "g", [mine.token, other.token, gone.token, "unknown"])
        #expect(h.engine.deviceGroups(sender: "111").map(\.members) == [[mine.token]])
        await #expect(throws: DeviceGroupError.noValidRegistrationIDs) {
            try await h.engine.manageDeviceGroup(sender: "111", .add(key: key, name: nil, tokens: [other.token, gone.token]))
        }
        // Another sender sees nothing of it.
        #expect(h.engine.deviceGroups(sender: "222").isEmpty)
        #expect(h.engine.deviceGroupKey(sender: "222", name: "g") == nil)
        await #expect(throws: DeviceGroupError.notFound) {
            try await h.engine.manageDeviceGroup(sender: "222", .add(key: key, name: nil, tokens: [other.token]))
        }
    }

    @Test func aGroupSendReachesEachMemberAndCountsThem() async throws {
        let h = try Harness()
        let a = try await h.register(), b = try await h.register()
        let key = try await create(h, "g", [a.token, b.token])
        let da = await h.connect(a.token)
        let outcome = await sendGroup(h, key, message("m1") { $0.collapseKey = "k" })
        #expect(outcome == GroupSendOutcome(notificationKey: key, success: 2, failed: []))
        try await h.waitUntil { da.ids.count == 1 }
        // b is offline: the message waits in its own queue, with the group message's options.
        let queued = try h.queue(b.token)
        #expect(queued.map(\.appMessageID) == ["m1"] && queued.first?.collapseKey == "k")
    }

    @Test func partialFailureListsTheFailedMembersAndPrunesTheDeadOnes() async throws {
        let h = try Harness()
        let ok = try await h.register()
        let uninstalled = try await h.register()
        let otherApp = try await h.register(app: "com.example.other")
        let key = try await create(h, "g", [ok.token, uninstalled.token, otherApp.token])
        try await h.engine.uninstall(token: uninstalled.token)

        let first = await sendGroup(h, key, message("m1") { $0.restrictedPackageName = "com.example.app" })
        #expect(first?.success == 1)
        #expect(first?.failedRegistrationIDs == [uninstalled.token, otherApp.token])
        #expect(first?.failed.map(\.error) == [.unregistered(token: uninstalled.token),
                                                .packageMismatch(token: otherApp.token, package: "com.example.app")])
        // The uninstalled member was found dead and left the group; the other app's member stays.
        await h.settle()
        #expect(h.engine.deviceGroups(sender: "111").first?.members == [ok.token, otherApp.token])
    }

    @Test func aGroupWhoseMembersAllDiedAnswersZeroAndZero() async throws {
        let h = try Harness()
        let a = try await h.register()
        let key = try await create(h, "g", [a.token])
        try await h.engine.uninstall(token: a.token)
        let first = await sendGroup(h, key, message("m1"))
        #expect(first == GroupSendOutcome(notificationKey: key, success: 0, failed: [(a.token, .unregistered(token: a.token))]))
        #expect(first?.allFailed == true)
        let second = await sendGroup(h, key, message("m2"))
        #expect(second == GroupSendOutcome(notificationKey: key, success: 0, failed: []))
        #expect(second?.allFailed == false)
        // The key still works: the group can take members again.
        let b = try await h.register()
        _ = try await h.engine.manageDeviceGroup(sender: "111", .add(key: key, name: "g", tokens: [b.token]))
        #expect(await sendGroup(h, key, message("m3"))?.success == 1)
    }

    @Test func aMemberNotRegisteredForTheSenderIsASenderMismatch() async throws {
        // Membership is checked when a token joins, and the emulator never takes a sender from a
        // registration; a group written by an older build (or by hand) may still hold one.
        let store = Harness.newStore()
        var token = ""
        var groupID = ""
        do {
            let h = try Harness(store: store)
            token = try await h.register(senders: ["222"]).token
            groupID = NotificationKey.newGroupID()
            h.engine.committer.submit(.upsertDeviceGroup(DeviceGroupRecord(id: groupID, senderID: "111", name: "g",
                                                                          members: [token], createdAt: 0)))
            await h.settle()
        }
        let h = try Harness(store: store)
        let key = NotificationKey.make(groupID: groupID)
        let outcome = await sendGroup(h, key, message("m1"))
        #expect(outcome?.failed.map(\.error) == [.senderMismatch(token: token, sender: "111")])
        #expect(outcome?.allFailed == true)
    }

    @Test func keysOfNoGroupAndOtherSendersGroupsAreNotFound() async throws {
        let h = try Harness()
        let a = try await h.register(senders: ["111", "222"])
        let key = try await create(h, "g", [a.token])
        #expect(await h.send(data("m1", to: key), from: "222") == .nack(.groupNotFound(key: key)))
        let stranger = NotificationKey.make(groupID: NotificationKey.newGroupID())
        #expect(await h.send(data("m2", to: stranger)) == .nack(.groupNotFound(key: stranger)))
        // A deleted group's key: found nowhere.
        _ = try await h.engine.manageDeviceGroup(sender: "111", .remove(key: key, name: nil, tokens: [a.token]))
        #expect(await h.send(data("m3", to: key)) == .nack(.groupNotFound(key: key)))
        #expect(h.engine.deviceGroups(sender: "111").isEmpty)
    }

    @Test func groupsSurviveARestart() async throws {
        let store = Harness.newStore()
        var key = ""
        var token = ""
        do {
            let h = try Harness(store: store)
            token = try await h.register().token
            key = try await create(h, "durable", [token])
        }
        let h = try Harness(store: store)
        #expect(h.engine.deviceGroups(sender: "111").map(\.name) == ["durable"])
        #expect(h.engine.deviceGroups(token: token).map(\.name) == ["durable"])
        #expect(await sendGroup(h, key, message("m1"))?.success == 1)
        await #expect(throws: DeviceGroupError.alreadyExists) { try await create(h, "durable", [token]) }
    }

    @Test func aRefusedWriteLeavesNoGroup() async throws {
        let h = try Harness()
        let a = try await h.register()
        h.engine.store.injectFailures { if case .upsertDeviceGroup = $0 { true } else { false } }
        await #expect(throws: DeviceGroupError.self) { try await create(h, "g", [a.token]) }
        h.engine.store.injectFailures(nil)
        #expect(h.engine.deviceGroups(sender: "111").isEmpty)
        _ = try await create(h, "g", [a.token])
    }

    @Test func upstreamToAGroupGoesToItsSenderMarkedWithTheKeyAndName() async throws {
        let h = try Harness()
        let member = try await h.register()
        let outsider = try await h.register()
        let key = try await create(h, "family", [member.token])
        let server = h.appServer(id: "c1")
        let sent = await h.upstream(member.token, ["to": .string(key), "message_id": "u1", "data": ["k": "v"]])
        #expect(sent == .sent(messageID: "u1"))
        try await h.waitUntil { server.ids == ["u1"] }
        let json = try JSONValue.parse(try #require(server.sent.withLock { $0.first?.json }))
        #expect(json["to"] == .string(key))
        #expect(json["notification_key_name"] == "family")
        #expect(json["from"] == .string(member.token))
        #expect(json["category"] == "com.example.app")
        // Not a member, or no such group: refused as a wrong addressee.
        #expect(await h.upstream(outsider.token, ["to": .string(key), "message_id": "u2"]) == .sendError(messageID: "u2", error: .invalidSender))
        let stranger = NotificationKey.make(groupID: NotificationKey.newGroupID())
        #expect(await h.upstream(member.token, ["to": .string(stranger), "message_id": "u3"]) == .sendError(messageID: "u3", error: .invalidSender))
    }

    @Test func resetForgetsTheGroups() async throws {
        let h = try Harness()
        let a = try await h.register()
        _ = try await create(h, "g", [a.token])
        _ = try await h.engine.reset()
        #expect(h.engine.deviceGroups(sender: "111").isEmpty)
        #expect(try h.engine.store.loadDeviceGroups().isEmpty)
    }
}
