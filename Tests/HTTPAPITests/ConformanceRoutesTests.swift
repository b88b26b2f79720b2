import CCSEngine
import CCSProtocol
import FaultInjection
import Hummingbird
import HummingbirdTesting
import Testing

/// `/emulator/v1/faults` and `/emulator/v1/audit` through the router test client.
@Suite struct ConformanceRoutesTests {
    typealias F = AdminAPITests

    @Test func faultRulesAreAddedListedAndRemoved() async throws {
        let f = try F.Fixture()
        try await f.test { client in
            let created = try await F.post(client, "/emulator/v1/faults",
                                           #"{"action":"nack","code":"SERVICE_UNAVAILABLE","sender":"1","times":2}"#)
            #expect(created.status == .created)
            let rule = try F.json(created)
            #expect(rule["id"] == "f1" && rule["point"] == "ccs_downstream" && rule["fired"] == 0)
            let named = try await F.post(client, "/emulator/v1/faults", #"{"id":"slow","action":"delay_ack","delay_ms":5}"#)
            #expect(named.status == .created)
            let list = try F.json(try await client.execute(uri: "/emulator/v1/faults", method: .get))
            #expect(list["rules"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["f1", "slow"])
            #expect(f.engine.faults.isActive(.ccsDownstream))

            let bad = try await F.post(client, "/emulator/v1/faults", #"{"action":"nack","code":"NOPE"}"#)
            #expect(bad.status == .badRequest)
            #expect(try F.json(bad)["error"]?["message"]?.stringValue?.hasPrefix("invalid fault rule: code:") == true)
            let notJSON = try await F.post(client, "/emulator/v1/faults", "[1]")
            #expect(notJSON.status == .badRequest)

            let gone = try await client.execute(uri: "/emulator/v1/faults/slow", method: .delete)
            #expect(gone.status == .ok)
            let again = try await client.execute(uri: "/emulator/v1/faults/slow", method: .delete)
            #expect(again.status == .notFound)
            let all = try F.json(try await client.execute(uri: "/emulator/v1/faults", method: .delete))
            #expect(all["removed"] == 1)
            #expect(!f.engine.faults.isActive(.ccsDownstream))
            // On disk: the store's copy is empty too.
            #expect(try f.engine.store.meta("fault_rules") == "[]")
        }
    }

    @Test func theFaultLogAndTheAudit() async throws {
        let f = try F.Fixture()
        try await f.test { client in
            _ = try await F.post(client, "/emulator/v1/faults", #"{"id":"n","action":"nack","code":"INTERNAL_SERVER_ERROR"}"#)
            _ = f.engine.faults.decide(.ccsDownstream, .init(sender: "7", messageID: "m-1", origin: "ccs:c1"))
            let log = try F.json(try await client.execute(uri: "/emulator/v1/faults/log?rule=n", method: .get))
            #expect(log["faults"]?.arrayValue?.first?["message_id"] == "m-1")
            #expect(log["faults"]?.arrayValue?.first?["at"] == .int(f.clock.nowMillis()))

            f.engine.audit.connectionOpened("c1", sender: "7")
            f.engine.audit.outboundSent(connection: "c1", messageID: "u1", receipt: false)
            f.engine.audit.connectionClosed("c1")
            let audit = try F.json(try await client.execute(uri: "/emulator/v1/audit?sender=7", method: .get))
            #expect(audit["clean"] == false)
            let finding = audit["senders"]?.arrayValue?.first?["findings"]?.arrayValue?.first
            #expect(finding?["rule"] == "ack-upstream" && finding?["source"]
                    == "GCM CCS guide, Upstream Messages and Flow Control; FCM, Receive upstream messages (CCS §4, §5.1 in docs/sources.md)")
            #expect(audit["connections"]?.arrayValue?.first?["closed_at"] != nil)
            let reset = try await client.execute(uri: "/emulator/v1/audit", method: .delete)
            #expect(reset.status == .ok)
            #expect(try F.json(try await client.execute(uri: "/emulator/v1/audit", method: .get))["clean"] == true)
            #expect(try F.json(try await client.execute(uri: "/emulator/v1/faults/log", method: .get))["faults"] == .array([]))
        }
    }
}
