import Foundation

/// The app server under test, started from a shell command line with the runner's environment
/// (docs/conformance.md, "The contract"); its output goes to a log file for the report.
final class AppServerProcess: @unchecked Sendable {
    // @unchecked: `process` is touched only by the runner's one task, in order.
    let process = Process()
    let logURL: URL

    init(command: String, environment: [String: String], logURL: URL) throws {
        self.logURL = logURL
        FileManager.default.createFile(atPath: logURL.path, contents: nil)
        let log = try FileHandle(forWritingTo: logURL)
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        // `exec`: the signals of `stop` reach the app server itself, not a shell around it.
        process.arguments = ["-c", "exec " + command]
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var isRunning: Bool { process.isRunning }
    var exitStatus: Int32 { process.terminationStatus }

    /// SIGTERM, up to 5 s to exit, then SIGKILL.
    func stop() async {
        guard process.isRunning else { return }
        process.terminate()
        for _ in 0..<250 where process.isRunning {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// The end of what it printed, for a failed scenario's report.
    func logTail(_ bytes: Int = 4000) -> String {
        guard let data = try? Data(contentsOf: logURL) else { return "" }
        return String(decoding: data.suffix(bytes), as: UTF8.self)
    }
}
