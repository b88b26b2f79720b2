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
    @discardableResult
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
                let result = try body(session)
                try session.flush()
                return result
            } catch {
                session.abandon()
                if session.connection.isClosed { slot = nil }
                throw error
            }
        }
    }

    /// Runs `body` in one transaction, alone on the connection: committed if it returns, rolled back
    /// if it throws.
    @discardableResult
    func transaction<T>(_ body: (Session) throws -> T) throws -> T {
        try withSession { s in
            try s.execute("BEGIN")
            do {
                let result = try body(s)
                try s.execute("COMMIT")
                return result
            } catch {
                s.abandon()
                if !s.connection.isClosed { _ = try? s.execute("ROLLBACK") }
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

    /// Statements on the connection. `send` does not wait: statements go out back to back (the driver
    /// queues them on the connection, in order) and are waited for together by the next `flush`,
    /// `rows` or `execute`, or at the end of `withSession`. A batch of writes then costs about one
    /// round trip instead of one per statement. The first failure is the one reported.
    final class Session {
        let connection: PostgresConnection
        let logger: Logger
        private var pending: [(result: EventLoopFuture<PostgresQueryResult>, sql: String,
                               then: (([PostgresRow]) throws -> Void)?)] = []

        init(connection: PostgresConnection, logger: Logger) {
            self.connection = connection
            self.logger = logger
        }

        /// Sends one statement without waiting; `then` gets its rows at the next flush.
        func send(_ sql: String, _ binds: PostgresBindings = PostgresBindings(),
                  then: (([PostgresRow]) throws -> Void)? = nil) {
            pending.append((connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger), sql, then))
        }

        /// Waits for every statement sent; runs their `then`s in order; throws the first failure.
        func flush() throws {
            let waiting = pending
            pending = []
            var failure: (any Error)?
            for item in waiting {
                do {
                    let result = try item.result.wait()
                    if failure == nil { try item.then?(result.rows) }
                } catch let error as PSQLError {
                    if failure == nil { failure = PostgresFailure(error, sql: item.sql) }
                } catch {
                    if failure == nil { failure = error }
                }
            }
            if let failure { throw failure }
        }

        /// After a failure: waits out what is still on the wire, ignoring it.
        func abandon() {
            for item in pending { _ = try? item.result.wait() }
            pending = []
        }

        /// The rows of one statement with `$1…` parameters (after everything sent before it).
        func rows(_ sql: String, _ binds: PostgresBindings = PostgresBindings()) throws -> [PostgresRow] {
            try flush()
            return try run(sql, binds).rows
        }

        /// One statement with `$1…` parameters, waited for; the number of rows it changed.
        @discardableResult
        func execute(_ sql: String, _ binds: PostgresBindings = PostgresBindings()) throws -> Int {
            try flush()
            return try run(sql, binds).metadata.rows ?? 0
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
