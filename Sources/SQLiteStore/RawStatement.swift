import GRDB
import GRDBSQLite
import StoreModel

/// The store's hottest statements (a message queued for a device, an upstream message kept for its
/// app server, and their removals) bound through SQLite's C API. GRDB's `StatementArguments` box
/// every value in a `DatabaseValue` and bind through generic code: in `bench downstream --offline`
/// that was about a tenth of the writer thread, which is what limits that path.
///
/// Values are bound as GRDB binds them (text with `SQLITE_TRANSIENT` up to its first NUL, booleans
/// as 0 and 1), so rows read back the same whichever way they were written.
struct RawStatement {
    private let statement: Statement
    private let db: Database
    private var stmt: OpaquePointer { statement.sqliteStatement }

    init(_ db: Database, sql: String) throws {
        self.db = db
        statement = try db.cachedStatement(sql: sql)
        sqlite3_reset(stmt)
        sqlite3_clear_bindings(stmt)
    }

    func bind(_ index: Int32, _ value: String?) {
        guard let value else { sqlite3_bind_null(stmt, index); return }
        _ = sqlite3_bind_text(stmt, index, value, -1, Self.transient)
    }

    func bind(_ index: Int32, _ value: Int64?) {
        guard let value else { sqlite3_bind_null(stmt, index); return }
        sqlite3_bind_int64(stmt, index, value)
    }

    func bind(_ index: Int32, _ value: Int) { sqlite3_bind_int64(stmt, index, Int64(value)) }

    func bind(_ index: Int32, _ value: Bool) { sqlite3_bind_int64(stmt, index, value ? 1 : 0) }

    /// Runs a statement that returns no rows.
    func execute() throws {
        defer { sqlite3_reset(stmt); sqlite3_clear_bindings(stmt) }
        let code = sqlite3_step(stmt)
        guard code == SQLITE_DONE else { throw error(code) }
    }

    /// The first column of the first row as an integer, nil without a row (or for NULL).
    func int64() throws -> Int64? {
        defer { sqlite3_reset(stmt); sqlite3_clear_bindings(stmt) }
        let code = sqlite3_step(stmt)
        switch code {
        case SQLITE_ROW:
            return sqlite3_column_type(stmt, 0) == SQLITE_NULL ? nil : sqlite3_column_int64(stmt, 0)
        case SQLITE_DONE:
            return nil
        default:
            throw error(code)
        }
    }

    private func error(_ code: Int32) -> DatabaseError {
        DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)),
                      sql: statement.sql)
    }

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}
