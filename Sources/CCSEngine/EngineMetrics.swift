import DeliveryCore
import CoreMetrics
import Locking
import PushDomain

/// What the engine counts, through swift-metrics with the factory the emulator chose (Prometheus
/// behind `/metrics`, docs/admin-api.md#metrics). No global bootstrap: several emulators may run in
/// one process (the conformance runner), each with its own registry.
public final class EngineMetrics: Sendable {
    /// How a send request's answer went.
    public enum Outcome: String, Sendable {
        case accepted
        case refused
        case notStored = "not_stored"
    }

    private struct Key: Hashable {
        var api: SendAPI
        var outcome: Outcome
        var code: String
    }

    private let factory: any MetricsFactory
    private let messages = Locked<[Key: Counter]>([:])
    private let sendDuration = Locked<[SendAPI: Timer]>([:])
    private let deliveries = Locked<[Platform: Counter]>([:])
    let deviceAcks: Counter
    let fanOuts: Counter
    let fanOutDevices: Counter
    let outboundUpstream: Counter
    let outboundReceipts: Counter

    let commitDuration: Timer
    let batchSize: Recorder

    public init(factory: any MetricsFactory) {
        self.factory = factory
        commitDuration = Timer(label: "ccs_emulator_store_commit_duration_seconds", factory: factory)
        batchSize = Recorder(label: "ccs_emulator_store_batch_ops", aggregate: true, factory: factory)
        deviceAcks = Counter(label: "ccs_emulator_device_acks_total", factory: factory)
        fanOuts = Counter(label: "ccs_emulator_fanouts_total", factory: factory)
        fanOutDevices = Counter(label: "ccs_emulator_fanout_devices_total", factory: factory)
        outboundUpstream = Counter(label: "ccs_emulator_outbound_sent_total", dimensions: [("kind", "upstream")], factory: factory)
        outboundReceipts = Counter(label: "ccs_emulator_outbound_sent_total", dimensions: [("kind", "receipt")], factory: factory)
    }

    /// One answer to a send request (one per token of a multicast).
    public func answered(api: SendAPI, outcome: Outcome, code: String = "") {
        Self.cached(messages, Key(api: api, outcome: outcome, code: code)) {
            Counter(label: "ccs_emulator_messages_total",
                    dimensions: [("api", api.rawValue), ("outcome", outcome.rawValue), ("code", code)], factory: factory)
        }.increment()
    }

    /// From a send request's arrival at the engine to its answer.
    func sendTook(api: SendAPI, nanoseconds: Int64) {
        Self.cached(sendDuration, api) {
            Timer(label: "ccs_emulator_send_duration_seconds", dimensions: [("api", api.rawValue)], factory: factory)
        }.recordNanoseconds(nanoseconds)
    }

    func delivered(_ count: Int, platform: Platform) {
        Self.cached(deliveries, platform) {
            Counter(label: "ccs_emulator_deliveries_total", dimensions: [("platform", platform.rawValue)], factory: factory)
        }.increment(by: count)
    }

    /// A metric with labels, made once: asking the factory for it each time would take its lock and
    /// look the name up in its registry on every message.
    private static func cached<K: Hashable & Sendable, M: Sendable>(_ cache: borrowing Locked<[K: M]>, _ key: K,
                                                                    _ make: () -> M) -> M {
        cache.withLock { cache in
            if let m = cache[key] { return m }
            let m = make()
            cache[key] = m
            return m
        }
    }
}
