import Foundation
import GRDB
import PushDomain

/// The export format (docs/export-format.md): every table of the emulator's state as JSON rows,
/// versioned, one row per line, so that a person can read it and a test can compare two exports.
/// An export imported into an empty (or any) data directory and exported again gives the same text.
public enum StoreSnapshot {
    public static let format = "ccs-emulator-export"
    public static let version = 1
    /// The file inside an export directory.
    public static let fileName = "ccs-emulator-export.json"
    /// The tables of the state, in the order they are written back (a row's references first).
    public static let tables = ["meta", "sender", "device", "message_body", "queued_message", "outbound", "tray",
                                "topic_subscription", "device_group", "apns_feedback"]

    public struct ImportError: Error, CustomStringConvertible {
        public var description: String
        public init(_ d: String) { description = d }
    }

    /// Writes an export into `directory` (made if missing) as `fileName`, atomically: a reader never
    /// sees half a file. Returns the file's path.
    @discardableResult
    public static func write(_ text: String, toDirectory directory: String) throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let file = URL(fileURLWithPath: directory).appendingPathComponent(fileName)
        try Data(text.utf8).write(to: file, options: .atomic)
        return file.path
    }

    /// An export's tables, once its header is checked: the format, its version and the schema (which
    /// must be `schema`, the reading backend's); no table unknown.
    public static func parse(_ text: String, schema: String) throws -> [String: JSONValue] {
        let root: JSONValue
        do { root = try JSONValue.parse(text) } catch {
            throw StoreSnapshot.ImportError("not an export: \(error)")
        }
        guard root["format"]?.stringValue == StoreSnapshot.format else {
            throw StoreSnapshot.ImportError("not an export: \"format\" is not \"\(StoreSnapshot.format)\"")
        }
        guard root["version"]?.intValue == Int64(StoreSnapshot.version) else {
            throw StoreSnapshot.ImportError("export version \(root["version"].map { $0.encoded() } ?? "none") is not \(StoreSnapshot.version), the one this build reads")
        }
        guard root["schema"]?.stringValue == schema else {
            throw StoreSnapshot.ImportError("the export's schema \"\(root["schema"]?.stringValue ?? "")\" is not this build's \"\(schema)\": export it again with this build's `serve` (which migrates), then import")
        }
        guard let tables = root["tables"]?.objectValue else { throw StoreSnapshot.ImportError("\"tables\" is missing") }
        if let unknown = tables.keys.first(where: { !StoreSnapshot.tables.contains($0) }) {
            throw StoreSnapshot.ImportError("unknown table \"\(unknown)\"")
        }
        return tables
    }

    /// The text of an export: a header line, then each table's rows one per line.
    public static func render(_ tables: [String: [JSONValue]], schema: String) -> String {
        var out = "{\"format\":\"\(format)\",\"version\":\(version),\"schema\":"
        out += JSONValue.string(schema).encoded()
        out += ",\n\"tables\":{"
        for (i, name) in Self.tables.enumerated() {
            out += (i == 0 ? "\n" : ",\n") + JSONValue.string(name).encoded() + ":["
            let rows = tables[name] ?? []
            for (j, row) in rows.enumerated() { out += (j == 0 ? "\n" : ",\n") + row.encoded() }
            out += rows.isEmpty ? "]" : "\n]"
        }
        out += "\n}}\n"
        return out
    }
}

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
