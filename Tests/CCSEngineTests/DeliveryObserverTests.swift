@testable import CCSEngine
import CCSProtocol
import Locking
import PushDomain
import StoreModel
import AppServerAudit
import Testing

/// Observers hear what happens to messages from the engine's events alone: nothing in the engine
/// names the journal or the metrics.
@Suite struct DeliveryObserverTests {
    final class Recorder: DeliveryObserver {
        let events = Locked<[String]>([])

        func observe(_ event: DeliveryEvent) {
            let line: String?
            switch event {
            case .message(let step, let m, _, _): line = "\(step) \(m.appMessageID)"
            case .handedOver(let deliveries, let platform): line = "handedOver \(deliveries.map(\.message.appMessageID)) \(platform)"
            case .removed(let removals): line = "removed \(removals.map(\.reason.rawValue))"
            case .faultApplied(let entry): line = "fault \(entry.ruleID)"
            case .answered, .refusedAtEdge, .receipt, .tapped, .fannedOut, .outboundSent, .sendTook, .batchEnded, .committed,
                 .appServer, .apns:
                line = nil
            }
            if let line { events.withLock { $0.append(line) } }
        }

        var lines: [String] { events.withLock { $0 } }
    }

    @Test func aMessageHandedOverAndAckedIsReportedStepByStep() async throws {
        let recorder = Recorder()
        let h = try Harness(observers: [recorder])
        let d = try await h.register()
        let device = FakeDevice()
        h.engine.deviceConnected(token: d.token, link: device)
        await h.settle()
        _ = await h.send(DownstreamMessage(to: d.token, messageID: "m1", data: ["k": "v"]))
        try await h.waitUntil { device.ids.count == 1 }
        h.engine.deviceAcknowledged(token: d.token, deviceMessageID: device.ids[0])
        try await h.waitUntil { recorder.lines.contains("deviceAcked m1") }
        #expect(recorder.lines.contains("handedOver [\"m1\"] android"))
        #expect(recorder.lines.firstIndex(of: "handedOver [\"m1\"] android")! < recorder.lines.firstIndex(of: "deviceAcked m1")!)
    }

    @Test func aCollapsedMessageIsReportedRemovedAfterItsCommit() async throws {
        let recorder = Recorder()
        let h = try Harness(observers: [recorder])
        let d = try await h.register()
        _ = await h.send(DownstreamMessage(to: d.token, messageID: "a", collapseKey: "k", data: ["n": "1"]))
        _ = await h.send(DownstreamMessage(to: d.token, messageID: "b", collapseKey: "k", data: ["n": "2"]))
        await h.settle()
        #expect(recorder.lines.contains("stored a") && recorder.lines.contains("stored b"))
        #expect(recorder.lines.contains("removed [\"collapsed\"]"))
    }
}

/// The front ends report what app servers do to the engine; the audit hears it as an observer.
@Suite struct AuditObserverTests {
    static func failedThenRetried(_ h: Harness) {
        let failed = AppServerEvent.HTTPSend(sender: "111", api: "v1", targetKey: "token:t", tokens: ["t"], status: 503,
                                             retryAfterSeconds: nil, unregistered: [])
        h.engine.report(appServer: .httpSend(failed))
        var retried = failed
        retried.status = 200
        h.engine.report(appServer: .httpSend(retried))  // at once: no backoff
    }

    @Test func aRetryWithoutBackoffReportedByAFrontEndIsAFinding() throws {
        let h = try Harness()
        Self.failedThenRetried(h)
        #expect(h.engine.audit.findings(sender: "111").map(\.rule) == [.retryBackoff])
    }

    @Test func withTheAuditOffNothingListens() throws {
        var configuration = Engine.Configuration()
        configuration.auditEnabled = false
        let h = try Harness(configuration: configuration)
        Self.failedThenRetried(h)
        #expect(!h.engine.isAuditing && h.engine.audit.findings().isEmpty)
    }
}
