import Foundation
import PushDomain

/// The export format (docs/export-format.md): every table of the emulator's state as JSON rows,
/// versioned, one row per line, so that a person can read it and a test can compare two exports.
/// An export imported into an empty (or any) data directory and exported again gives the same text.
/// The state's schema, by the name of its newest migration: both backends keep the same tables
/// (docs/export-format.md), and an export names the schema it was written with.
public enum StoreSchema {
    public static let newest = "v11: refreshed tokens"
}

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
