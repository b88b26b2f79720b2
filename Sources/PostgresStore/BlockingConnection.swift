import Foundation
import Locking
import Logging
import NIOCore
import PostgresNIO

/// One PostgreSQL connection used from plain threads (the store's writer, the engine's readers):
/// `Persistence` is synchronous, so every call waits for its answer. Calls are serialized; a
/// connection found closed (the server restarted, the network dropped) is opened again by the next
/// call, while the call that found it fails (its batch is reported failed, nothing is half-applied:
/// the server rolled the transaction back).
///
/// Never call it from an event loop of `group`: waiting there would deadlock the loop.
final class BlockingConnection: Sendable {
    private let url: PostgresURL
    private let eventLoop: any EventLoop
    private let logger: Logger
    /// Statements run on every new connection (`SET …`).
    private let setup: [String]
    private let connection = Locked<PostgresConnection?>(nil)
    private let nextID = Locked(0)

    init(url: PostgresURL, eventLoop: any EventLoop, setup: [String], logger: Logger) {
        self.url = url
        self.eventLoop = eventLoop
        self.setup = setup
        self.logger = logger
    }

    /// Runs `body` with the connection, alone: no other call uses it meanwhile (a transaction is one body).
    func withSession<T>(_ body: (Session) throws -> T) throws -> T {
        try connection.withLock { slot -> T in
            let session: Session
            if let open = slot, !open.isClosed {
                session = Session(connection: open, logger: logger)
            } else {
                let id = nextID.withLock { n -> Int in n += 1; return n }
                let opened = try PostgresConnection.connect(on: eventLoop, configuration: url.configuration(),
                                                            id: id, logger: logger).wait()
                session = Session(connection: opened, logger: logger)
                do {
                    for statement in setup { try session.execute(statement) }
                } catch {
                    _ = try? opened.close().wait()
                    throw error
                }
                slot = opened
            }
            do {
                return try body(session)
            } catch {
                if session.connection.isClosed { slot = nil }
                throw error
            }
        }
    }

    func close() {
        connection.withLock { slot in
            if let open = slot { _ = try? open.close().wait() }
            slot = nil
        }
    }

    /// Statements on the connection, each waited for.
    struct Session {
        let connection: PostgresConnection
        let logger: Logger

        /// The rows of one statement with `$1…` parameters.
        func rows(_ sql: String, _ binds: PostgresBindings = PostgresBindings()) throws -> [PostgresRow] {
            try run(sql, binds).rows
        }

        /// One statement with `$1…` parameters; the number of rows it changed.
        @discardableResult
        func execute(_ sql: String, _ binds: PostgresBindings = PostgresBindings()) throws -> Int {
            try run(sql, binds).metadata.rows ?? 0
        }

        private func run(_ sql: String, _ binds: PostgresBindings) throws -> PostgresQueryResult {
            do {
                return try connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger).wait()
            } catch let error as PSQLError {
                throw PostgresFailure(error, sql: sql)
            }
        }

        /// Several statements without parameters, one after another (DDL). The driver speaks only the
        /// extended protocol, one statement per message, so the script is split at each `;` that ends a line.
        func script(_ sql: String) throws {
            for statement in sql.components(separatedBy: ";\n") {
                let trimmed = statement.trimmingCharacters(in: .whitespacesAndNewlines)
                if !trimmed.isEmpty && trimmed != ";" { try execute(trimmed.hasSuffix(";") ? String(trimmed.dropLast()) : trimmed) }
            }
        }
    }
}

/// Bindings written as a list: `binds("a", 1, nil as String?)`.
func binds(_ values: (any PostgresDynamicTypeEncodable)?...) -> PostgresBindings {
    var b = PostgresBindings(capacity: values.count)
    for value in values {
        if let value { b.append(value) } else { b.appendNull() }
    }
    return b
}

/// A failed statement, said plainly: PostgreSQL's SQLSTATE and message (postgres-nio's own error
/// prints a generic text, so that a query's values never reach a log by accident: the statement
/// here has `$n` placeholders, never values).
public struct PostgresFailure: Error, CustomStringConvertible {
    /// SQLSTATE (`40P01`, `23505`, …); nil when the connection failed rather than the statement.
    public var sqlState: String?
    public var message: String
    public var statement: String

    init(_ error: PSQLError, sql: String) {
        sqlState = error.serverInfo?[.sqlState]
        if let server = error.serverInfo?[.message] {
            message = server + (error.serverInfo?[.detail].map { " (\($0))" } ?? "")
        } else {
            message = "\(error.code)"
        }
        statement = sql.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
    }

    public var description: String {
        "PostgreSQL: \(message)\(sqlState.map { " [SQLSTATE \($0)]" } ?? "") in: \(statement.prefix(300))"
    }
}
