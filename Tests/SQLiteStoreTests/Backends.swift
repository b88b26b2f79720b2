import Locking
import StoreModel
import SQLiteStore
import Foundation
@testable import PostgresStore
import PushDomain
import Testing

/// The store backends every test of store semantics runs against: SQLite always; PostgreSQL when
/// `CCS_TEST_POSTGRES_URL` names a server (scripts/test starts a throwaway one and sets it; without
/// it the PostgreSQL cases are left out, and scripts/test says so).
enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres
    /// `InMemoryStore`: the same rules without a database, kept for as long as the test runs.
    case memory

    static let postgresURL: String? = {
        let value = ProcessInfo.processInfo.environment["CCS_TEST_POSTGRES_URL"] ?? ""
        return value.isEmpty ? nil : value
    }()

    static var available: [Backend] { postgresURL == nil ? [.sqlite, .memory] : [.sqlite, .postgres, .memory] }

    var testDescription: String { rawValue }
}

/// Where one test's state lives: a new SQLite file, or a new PostgreSQL database. `open()` may be
/// called again (a reopening: a restart of the emulator).
struct TestDatabase: Sendable {
    let backend: Backend
    let location: String

    init(_ backend: Backend) throws {
        self.backend = backend
        switch backend {
        case .sqlite:
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ccs-store-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            location = dir.appendingPathComponent("db.sqlite").path
        case .postgres:
            let base = try PostgresURL(parsing: Backend.postgresURL!)
            let name = "ccs_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            try PostgresStore.createDatabase(named: name, server: base)
            var url = base
            url.database = name
            location = url.urlString
        case .memory:
            location = "memory:" + UUID().uuidString
        }
    }

    /// The in-memory stores by location: opening one again is a restart that keeps its state.
    private static let memoryStores = Locked<[String: InMemoryStore]>([:])

    func open() throws -> any Persistence {
        switch backend {
        case .sqlite: return try Store(path: location, durability: .normal)
        case .postgres: return try PostgresStore(url: PostgresURL(parsing: location))
        case .memory:
            return Self.memoryStores.withLock { stores in
                if let store = stores[location] { return store }
                let store = InMemoryStore()
                stores[location] = store
                return store
            }
        }
    }
}

func temporaryStore(_ backend: Backend = .sqlite, devices tokens: [String] = ["t", "u", "h", "bad"]) throws -> any Persistence {
    let store = try TestDatabase(backend).open()
    // Messages are stored for registered devices only.
    try store.apply(tokens.map { .upsertDevice(device($0)) })
    return store
}
