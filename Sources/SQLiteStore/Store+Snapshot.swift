import Foundation
import GRDB
import PushDomain
import StoreModel

extension Store {
    /// The newest migration applied: an export names the schema its rows follow.
    func schemaName() throws -> String {
        try pool.read { db in
            try String.fetchOne(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid DESC LIMIT 1") ?? ""
        }
    }

    /// Every table of the state, read in one transaction (a consistent cut, also while a server runs).
    public func exportSnapshot() throws -> String {
        let (tables, schema): ([String: [JSONValue]], String) = try pool.read { db in
            var tables: [String: [JSONValue]] = [:]
            for name in StoreSnapshot.tables {
                let columns = try db.columns(in: name).map(\.name)
                let order = (1...columns.count).map(String.init).joined(separator: ", ")
                let rows = try Row.fetchAll(db, sql: "SELECT * FROM \(name) ORDER BY \(order)")
                tables[name] = rows.map { row in
                    var object: [String: JSONValue] = [:]
                    for column in columns { object[column] = Self.json(row[column] as DatabaseValue) }
                    return .object(object)
                }
            }
            let schema = try String.fetchOne(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid DESC LIMIT 1") ?? ""
            return (tables, schema)
        }
        return StoreSnapshot.render(tables, schema: schema)
    }

    /// Replaces the whole state with an export's, in one transaction (all or nothing).
    public func importSnapshot(_ text: String) throws {
        let tables = try StoreSnapshot.parse(text, schema: try schemaName())
        try pool.write { db in
            for name in StoreSnapshot.tables.reversed() { try db.execute(sql: "DELETE FROM \(name)") }
            for name in StoreSnapshot.tables {
                let known = Set(try db.columns(in: name).map(\.name))
                for (index, row) in (tables[name]?.arrayValue ?? []).enumerated() {
                    guard let object = row.objectValue else {
                        throw StoreSnapshot.ImportError("\(name)[\(index)] is not an object")
                    }
                    let columns = object.keys.sorted()
                    if let bad = columns.first(where: { !known.contains($0) }) {
                        throw StoreSnapshot.ImportError("\(name)[\(index)]: unknown column \"\(bad)\"")
                    }
                    var values: [DatabaseValue] = []
                    for column in columns {
                        guard let value = Self.databaseValue(object[column]!) else {
                            throw StoreSnapshot.ImportError("\(name)[\(index)].\(column): not a value a column holds")
                        }
                        values.append(value)
                    }
                    let placeholders = Array(repeating: "?", count: columns.count).joined(separator: ", ")
                    do {
                        try db.execute(sql: "INSERT INTO \(name) (\(columns.joined(separator: ", "))) VALUES (\(placeholders))",
                                       arguments: StatementArguments(values))
                    } catch let error as DatabaseError {
                        throw StoreSnapshot.ImportError("\(name)[\(index)]: \(error.message ?? "\(error.resultCode)")")
                    }
                }
            }
        }
    }

    private static func json(_ value: DatabaseValue) -> JSONValue {
        switch value.storage {
        case .null: return .null
        case .int64(let n): return .int(n)
        case .double(let d): return .double(d)
        case .string(let s): return .string(s)
        case .blob(let data): return .object(["base64": .string(data.base64EncodedString())])
        }
    }

    private static func databaseValue(_ value: JSONValue) -> DatabaseValue? {
        switch value {
        case .null: return .null
        case .int(let n): return n.databaseValue
        case .double(let d): return d.databaseValue
        case .string(let s): return s.databaseValue
        case .bool(let b): return (b ? 1 : 0).databaseValue
        case .object(let o):
            guard o.count == 1, let b = o["base64"]?.stringValue, let data = Data(base64Encoded: b) else { return nil }
            return data.databaseValue
        case .array: return nil
        }
    }
}
