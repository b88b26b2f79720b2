import ArgumentParser
import CCSProtocol
import CCSStore
import Foundation

/// `ccs-emulator export --data-dir D DIR`: the state of a data directory as an export (docs/export-format.md).
struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write the state of a data directory as an export (devices, tokens, subscriptions, groups, queues, clock).",
        discussion: """
        Reads DATA_DIR/ccs-emulator.sqlite in one read transaction, so it also works while `serve` runs \
        on that directory. `serve --import DIR` starts from the export; docs/export-format.md describes it.
        """)

    @Option(help: "The emulator's data directory.")
    var dataDir = ".ccs-emulator"
    @Argument(help: ArgumentHelp("Where to write \(StoreSnapshot.fileName) (made if missing).", valueName: "dir"))
    var directory: String

    func run() throws {
        let path = URL(fileURLWithPath: dataDir).appendingPathComponent("ccs-emulator.sqlite").path
        guard FileManager.default.fileExists(atPath: path) else {
            throw ValidationError("no emulator state in \(dataDir) (\(path) does not exist)")
        }
        let store = try Store(path: path)
        let file = try StoreSnapshot.write(try store.exportSnapshot(), toDirectory: directory)
        Output.line(JSONValue.object(["event": .string("exported"), "file": .string(file)]).encoded())
    }
}
