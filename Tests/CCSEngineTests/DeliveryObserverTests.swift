@testable import CCSEngine
import CCSProtocol
import Locking
import PushDomain
import StoreModel
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
            case .answered, .refusedAtEdge, .receipt, .tapped, .fannedOut, .outboundSent, .sendTook, .batchEnded, .committed:
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
