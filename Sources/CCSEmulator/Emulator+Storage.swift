import CCSEngine
import Foundation
import Logging
import MessageJournal
import PostgresStore
import SQLiteStore
import StoreModel

/// Opening what the engine keeps its state in: the data directory, the store (SQLite, or PostgreSQL
/// with its cluster), `--import`, the clock, the committer and the journal. Each part that must be
/// stopped becomes a service of the emulator's group as soon as it is open.
extension Emulator {
    /// The data directory, made (0700) if missing and checked for modes others could read.
    static func prepareDataDirectory(_ config: EmulatorConfiguration, logger: Logger) throws -> String {
        let fm = FileManager.default
        let dataDir = URL(fileURLWithPath: config.dataDirectory, relativeTo: URL(fileURLWithPath: fm.currentDirectoryPath))
            .standardizedFileURL.path
        do {
            try fm.createDirectory(atPath: dataDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw ConfigurationError("cannot create --data-dir \(dataDir): \(error.localizedDescription)")
        }
        try DataDirectoryPermissions.secure(dataDir, logger: logger)
        return dataDir
    }

    /// The senders of `--config` (sender id → key) and its named projects.
    static func loadSenders(_ config: EmulatorConfiguration,
                            logger: Logger) throws -> (senders: [String: String], projects: [String: String]) {
        guard let file = config.configFile else {
            if config.authMode == .strict {
                throw ConfigurationError("--auth strict needs --config FILE listing at least one sender")
            }
            return ([:], [:])
        }
        let senderFile = try SenderFile.load(from: file)
        if config.authMode == .strict && senderFile.senders.isEmpty {
            throw ConfigurationError(senderFile.noSendersExplanation) // names the unknown keys itself
        }
        for key in senderFile.unknownKeys {
            logger.warning("\(senderFile.unknownKeyWarning(key))")
        }
        return (senderFile.senders, senderFile.projects)
    }

    /// SQLite in the data directory, or PostgreSQL with this node's cluster (a service that leaves the
    /// cluster at the stop, and a service that closes the connections last).
    static func openStore(_ config: EmulatorConfiguration, url postgresURL: PostgresURL?, dataDir: String, logger: Logger,
                          services: inout ServiceList) throws -> (store: any Persistence, cluster: PostgresCluster?) {
        guard let postgresURL else {
            return (try Store(path: dataDir + "/ccs-emulator.sqlite", durability: config.durability), nil)
        }
        do {
            let postgres = try PostgresStore(url: postgresURL, synchronousCommit: config.durability == .full, logger: logger)
            services.add("postgres", .closeStore, StopOnShutdown("postgres") { postgres.close() })
            if config.resetState {
                try postgres.removeEverything()
                logger.notice("--reset-state: deleted the state in \(postgresURL) (every node's)")
            }
            // Every node on the database is one service (docs/scaling.md); alone, a cluster of one.
            let cluster = try PostgresCluster(store: postgres, logger: logger)
            services.add("cluster", .leaveCluster, StopOnShutdown("cluster") { cluster.stop() })
            logger.notice("state in \(postgresURL), node \(postgres.nodeID)")
            return (postgres, cluster)
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError("--store \(postgresURL): \(String(reflecting: error))")
        }
    }

    /// `--import`: before anything reads the state, so the engine, the clock and the fault rules start from it.
    static func importState(_ config: EmulatorConfiguration, into store: any Persistence, logger: Logger) throws {
        guard let from = config.importDirectory else { return }
        let file = URL(fileURLWithPath: from).appendingPathComponent(StoreSnapshot.fileName).path
        let text: String
        do { text = try String(contentsOfFile: file, encoding: .utf8) } catch {
            throw ConfigurationError("--import \(from): cannot read \(file): \(error.localizedDescription)")
        }
        do { try store.importSnapshot(text) } catch {
            throw ConfigurationError("--import \(from): \(error)")
        }
        logger.notice("imported the state from \(file)")
    }

    static func makeClock(_ kind: ClockKind, store: any Persistence) throws -> any EngineClock {
        switch kind {
        case .wall: return WallClock()
        case .virtual:
            if let saved = try store.meta(VirtualClock.metaKey).flatMap({ Int64($0) }) {
                return VirtualClock(startMillis: saved)
            }
            // Saved at once: a crash before the first advance must not move the clock.
            let start = WallClock().nowMillis()
            try store.apply([.setMeta(key: VirtualClock.metaKey, value: String(start))])
            return VirtualClock(startMillis: start)
        }
    }

    /// The committer, as a service that saves the virtual clock's time and commits what it still holds.
    static func startCommitter(_ config: EmulatorConfiguration, store: any Persistence, clock: any EngineClock,
                               services: inout ServiceList) -> GroupCommitter {
        let committer = GroupCommitter(store: store, cancellableDelay: .milliseconds(config.liveWriteDelayMillis))
        services.add("committer", .flushStore, StopOnShutdown("committer") {
            if let virtual = clock as? VirtualClock {
                committer.submit(.setMeta(key: VirtualClock.metaKey, value: String(virtual.nowMillis())))
            }
            await committer.shutdown()
        })
        return committer
    }

    /// The journal (`--journal on`), as a service that ends its event streams before the HTTP servers
    /// stop (they would wait for them forever) and writes what it holds after the store's last commit.
    static func startJournal(_ config: EmulatorConfiguration, dataDir: String, logger: Logger,
                             services: inout ServiceList) throws -> MessageJournal? {
        guard config.journal else { return nil }
        let journal = try openJournal(path: dataDir + "/journal.sqlite", config: config, logger: logger)
        services.add("journal-streams", .stopHTTP, StopOnShutdown("journal-streams") { journal.endFollowers() })
        services.add("journal", .flushJournal, StopOnShutdown("journal") { journal.shutdown() })
        return journal
    }

    /// The journal, or, when its file cannot be read (a power cut with `synchronous = OFF` can do that),
    /// a new one, with the old file kept aside: a lost record must not stop the emulator.
    static func openJournal(path: String, config: EmulatorConfiguration, logger: Logger) throws -> MessageJournal {
        let open = {
            try MessageJournal(path: path, retention: config.journalRetention,
                               logger: { [logger] in logger.error("journal: \($0)") })
        }
        do {
            return try open()
        } catch {
            let aside = path + ".unreadable-\(Int(Date().timeIntervalSince1970))"
            logger.error("the message journal \(path) could not be opened (\(error)); starting a new one, the old one is kept as \(aside)")
            let fm = FileManager.default
            try fm.moveItem(atPath: path, toPath: aside)
            for suffix in ["-wal", "-shm"] where fm.fileExists(atPath: path + suffix) {
                try? fm.moveItem(atPath: path + suffix, toPath: aside + suffix)
            }
            return try open()
        }
    }

    /// The database files `--reset-state` deletes; DATA_DIR/tls (the CA clients trust) and the lock stay.
    static let databaseFiles = ["ccs-emulator.sqlite", "ccs-emulator.sqlite-wal", "ccs-emulator.sqlite-shm",
                                "journal.sqlite", "journal.sqlite-wal", "journal.sqlite-shm"]

    static func resetState(in dataDir: String, logger: Logger) throws {
        let fm = FileManager.default
        var removed: [String] = []
        for name in databaseFiles where fm.fileExists(atPath: dataDir + "/" + name) {
            do { try fm.removeItem(atPath: dataDir + "/" + name) } catch {
                throw ConfigurationError("--reset-state: cannot delete \(dataDir)/\(name): \(error.localizedDescription)")
            }
            removed.append(name)
        }
        logger.notice("--reset-state: \(removed.isEmpty ? "no state to delete" : "deleted " + removed.joined(separator: ", ")) in \(dataDir); kept tls/")
    }

}
