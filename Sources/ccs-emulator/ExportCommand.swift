import ArgumentParser
import CCSProtocol
import PushDomain
import StoreModel
import SQLiteStore
import Foundation
import PostgresStore

/// `ccs-emulator export --data-dir D DIR`: the state of a data directory as an export (docs/export-format.md).
struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write the state of a data directory as an export (devices, tokens, subscriptions, groups, queues, clock).",
        discussion: """
        Reads DATA_DIR/ccs-emulator.sqlite (or the PostgreSQL database of --store) in one read \
        transaction, so it also works while `serve` runs on it. `serve --import DIR` starts from the \
        export, on either backend; docs/export-format.md describes it.
        """)

    @Option(help: "The emulator's data directory.")
    var dataDir = ".ccs-emulator"
    @Option(help: ArgumentHelp("Read the state from this PostgreSQL database instead (serve --store).", valueName: "url"))
    var store: String?
    @Argument(help: ArgumentHelp("Where to write \(StoreSnapshot.fileName) (made if missing).", valueName: "dir"))
    var directory: String

    func run() throws {
        if let store {
            let url: PostgresURL
            do { url = try PostgresURL(parsing: store) } catch { throw ValidationError("\(error)") }
            let postgres = try PostgresStore(url: url)
            defer { postgres.close() }
            let file = try StoreSnapshot.write(try postgres.exportSnapshot(), toDirectory: directory)
            Output.line(JSONValue.object(["event": .string("exported"), "file": .string(file)]).encoded())
            return
        }
        let path = URL(fileURLWithPath: dataDir).appendingPathComponent("ccs-emulator.sqlite").path
        guard FileManager.default.fileExists(atPath: path) else {
            throw ValidationError("no emulator state in \(dataDir) (\(path) does not exist)")
        }
        let store = try Store(path: path)
        let file = try StoreSnapshot.write(try store.exportSnapshot(), toDirectory: directory)
        Output.line(JSONValue.object(["event": .string("exported"), "file": .string(file)]).encoded())
    }
}
