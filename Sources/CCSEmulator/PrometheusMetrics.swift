import CCSEngine
import CoreMetrics
import Prometheus

/// `/metrics`: the engine's counters and histograms (swift-metrics) in a Prometheus registry of this
/// emulator's own (swift-prometheus), and the gauges read when a scrape comes (queue depth,
/// connections, the journal). docs/admin-api.md#metrics lists every series.
final class PrometheusMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    let engineMetrics: EngineMetrics
    private let factory: PrometheusMetricsFactory

    init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        // The emulator answers in microseconds to milliseconds: the default buckets start at 5 ms.
        let fine: [Duration] = [.microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1),
                                .microseconds(2500), .milliseconds(5), .milliseconds(10), .milliseconds(25),
                                .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
                                .seconds(1), .milliseconds(2500), .seconds(10)]
        factory.defaultDurationHistogramBuckets = fine
        factory.valueHistogramBuckets["ccs_emulator_store_batch_ops"] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 4096]
        self.factory = factory
        engineMetrics = EngineMetrics(factory: factory)
    }

    /// The exposition text, with the gauges as of now.
    func scrape(engine: Engine) -> String {
        let queued = (try? engine.queueCounts().values.reduce(0, +)) ?? -1
        gauge("ccs_emulator_queued_messages").record(queued)
        gauge("ccs_emulator_registered_devices").record(engine.deviceCount)
        gauge("ccs_emulator_connections", [("kind", "app_server")]).record(engine.appServerConnectionCount)
        gauge("ccs_emulator_connections", [("kind", "device")]).record(engine.onlineDeviceCount)
        if let journal = engine.journal {
            let f = journal.figures
            gauge("ccs_emulator_journal_events_recorded").record(f.recorded)
            gauge("ccs_emulator_journal_events_dropped").record(f.dropped)
            gauge("ccs_emulator_journal_followers").record(f.followers)
        }
        return registry.emitToString()
    }

    private func gauge(_ label: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Gauge {
        // The factory hands back the registry's existing gauge for the same name and labels.
        CoreMetrics.Gauge(label: label, dimensions: dimensions, factory: factory)
    }
}
