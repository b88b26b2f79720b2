import DeliveryCore
import CCSEngine
import Foundation
import Locking
import Logging
import PostgresStore
import StoreModel

/// The engine and what it is made from, opened before any listener binds.
struct EmulatorCore: Sendable {
    let engine: Engine
    let prometheus: PrometheusMetrics
    /// `--config`'s named projects (project id → sender id), for the HTTP v1 routes.
    let projectSenders: [String: String]
    let cluster: PostgresCluster?
}

/// What the stop reads that the caller of `shutdown(maxWait:)` or the end of `start` decides.
final class StopSettings: Sendable {
    private let state = Locked<(maxWait: Duration, started: Bool)>((.seconds(2), false))

    var maxWait: Duration {
        get { state.withLock { $0.maxWait } }
        set { state.withLock { $0.maxWait = newValue } }
    }

    /// Set once `start` returned: a start that failed half-way exports nothing.
    var started: Bool {
        get { state.withLock { $0.started } }
        set { state.withLock { $0.started = newValue } }
    }
}

extension Emulator {
    static func openCore(_ config: EmulatorConfiguration, dataDir: String, logger: Logger,
                         services: inout ServiceList) throws -> EmulatorCore {
        let postgresURL = try storeURL(config)
        if config.webPush && postgresURL != nil {
            throw ConfigurationError("--web-push on needs the embedded store: with --store every node would push the same messages")
        }
        if config.resetState {
            try resetState(in: dataDir, logger: logger)
        }
        let senders = try loadSenders(config, logger: logger)
        let (store, cluster) = try openStore(config, url: postgresURL, dataDir: dataDir, logger: logger, services: &services)
        try importState(config, into: store, logger: logger)
        let clock = try makeClock(config.clock, store: store)
        let committer = startCommitter(config, store: store, clock: clock, services: &services)
        let journal = try startJournal(config, dataDir: dataDir, logger: logger, services: &services)
        let prometheus = PrometheusMetrics()
        let engine = try Engine(committer: committer, clock: clock,
                                configuration: engineConfiguration(config, senders: senders.senders),
                                journal: journal, metrics: prometheus.engineMetrics, cluster: cluster, logger: logger)
        cluster?.start(events: engine)
        return EmulatorCore(engine: engine, prometheus: prometheus, projectSenders: senders.projects, cluster: cluster)
    }

    static func engineConfiguration(_ config: EmulatorConfiguration, senders: [String: String]) -> Engine.Configuration {
        var c = Engine.Configuration(authMode: config.authMode, configuredSenders: senders,
                                     maxUnackedOutbound: config.maxUnackedOutbound,
                                     ackTimeoutMillis: config.ackTimeoutMillis,
                                     maxConnectionsPerSender: config.maxConnectionsPerSender)
        c.auditEnabled = config.audit
        c.deviceWindow = config.deviceWindow
        c.deviceMessageRate = config.deviceMessageRate
        c.projectMessageRate = config.projectMessageRate
        c.topicMessageRate = config.topicMessageRate
        c.collapsibleThrottle = config.collapsibleThrottle
        c.shards = min(config.shards ?? max(1, config.eventLoopThreads), Engine.maximumShards)
        return c
    }

    /// The engine's part of the stop: app servers are told to drain and given `maxWait` to have their
    /// downstream messages answered; later, every connection left is closed.
    static func addConnectionServices(_ engine: Engine, settings: StopSettings, services: inout ServiceList) {
        services.add("drain", .drainConnections, StopOnShutdown("drain") {
            engine.drainAll()
            let deadline = ContinuousClock.now.advanced(by: settings.maxWait)
            while ContinuousClock.now < deadline, engine.connections().contains(where: { $0.pending > 0 }) {
                try? await Task.sleep(for: .milliseconds(20))
            }
        })
        services.add("connections", .closeConnections, StopOnShutdown("connections") {
            engine.closeAllConnections()
            try? await Task.sleep(for: .milliseconds(100)) // lets the closing tags go out
        })
    }

    /// `--export-on-exit`: the state, once everything was committed, after a start that finished.
    static func addExportOnExit(_ config: EmulatorConfiguration, engine: Engine, settings: StopSettings, logger: Logger,
                                services: inout ServiceList) {
        guard let to = config.exportOnExitDirectory else { return }
        services.add("export-on-exit", .exportState, StopOnShutdown("export-on-exit") {
            guard settings.started else { return }
            do {
                let file = try StoreSnapshot.write(try engine.store.exportSnapshot(), toDirectory: to)
                logger.notice("exported the state to \(file)")
            } catch {
                logger.error("--export-on-exit \(to): \(error)")
            }
        })
    }
}
