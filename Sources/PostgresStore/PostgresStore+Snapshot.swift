import StoreModel
import PostgresNIO
import PushDomain

/// The export format (docs/export-format.md) on PostgreSQL: the same tables, columns, row order and
/// schema name as the SQLite backend's, so an export moves between the two unchanged.
extension PostgresStore {
    public func exportSnapshot() throws -> String {
        let tables: [String: [JSONValue]] = try read { s in
            // One snapshot of the whole state, also while nodes write.
            try s.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            defer { _ = try? s.execute("COMMIT") }
            var tables: [String: [JSONValue]] = [:]
            for name in StoreSnapshot.tables {
                let columns = PostgresSchema.exportedColumns[name] ?? []
                let order = columns.map { $0.isText ? "\($0.name) COLLATE \"C\" NULLS FIRST" : "\($0.name) NULLS FIRST" }
                let sql = "SELECT \(columns.map(\.name).joined(separator: ", ")) FROM \(name) ORDER BY \(order.joined(separator: ", "))"
                tables[name] = try s.rows(sql).map { row in
                    let r = row.makeRandomAccess()
                    var object: [String: JSONValue] = [:]
                    for (index, column) in columns.enumerated() {
                        if column.isText {
                            object[column.name] = try r[index].decode(String?.self).map(JSONValue.string) ?? .null
                        } else {
                            object[column.name] = try r[index].decode(Int64?.self).map(JSONValue.int) ?? .null
                        }
                    }
                    return .object(object)
                }
            }
            return tables
        }
        return StoreSnapshot.render(tables, schema: PostgresSchema.name)
    }

    /// Replaces the whole state with an export's, in one transaction (all or nothing); the same checks
    /// and errors as the SQLite backend's import.
    public func importSnapshot(_ text: String) throws {
        let tables = try StoreSnapshot.parse(text, schema: PostgresSchema.name)
        try writer.transaction { s in
            for name in StoreSnapshot.tables.reversed() { try s.execute("DELETE FROM \(name)") }
            for name in StoreSnapshot.tables {
                let known = PostgresSchema.exportedColumns[name] ?? []
                for (index, row) in (tables[name]?.arrayValue ?? []).enumerated() {
                    guard let object = row.objectValue else {
                        throw StoreSnapshot.ImportError("\(name)[\(index)] is not an object")
                    }
                    let columns = object.keys.sorted()
                    var bindings = PostgresBindings(capacity: columns.count)
                    for column in columns {
                        guard let kind = known.first(where: { $0.name == column }) else {
                            throw StoreSnapshot.ImportError("\(name)[\(index)]: unknown column \"\(column)\"")
                        }
                        switch (object[column]!, kind.isText) {
                        case (.null, _): bindings.appendNull()
                        case (.string(let v), true): bindings.append(v)
                        case (.int(let v), false): bindings.append(v)
                        case (.bool(let v), false): bindings.append(Int64(v ? 1 : 0))
                        default:
                            throw StoreSnapshot.ImportError("\(name)[\(index)].\(column): not a value this column holds")
                        }
                    }
                    let placeholders = (1...max(columns.count, 1)).map { "$\($0)" }.prefix(columns.count).joined(separator: ", ")
                    do {
                        try s.execute("INSERT INTO \(name) (\(columns.joined(separator: ", "))) VALUES (\(placeholders))", bindings)
                    } catch let error as PostgresFailure {
                        throw StoreSnapshot.ImportError("\(name)[\(index)]: \(error.message)")
                    }
                }
            }
            for (sequence, table, column) in PostgresSchema.sequences {
                try s.execute("SELECT setval('\(sequence)', COALESCE((SELECT MAX(\(column)) FROM \(table)), 0) + 1, false)")
            }
        }
    }
}
