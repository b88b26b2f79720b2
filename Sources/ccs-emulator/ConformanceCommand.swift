import ArgumentParser
import ConformanceRunner
import Foundation
import PushDomain

struct Conformance: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check an app server against CCS's client rules, with scripted devices and injected faults.",
        discussion: "See docs/conformance.md: the contract, the scenario files, the built-in suite and the audit.",
        subcommands: [ConformanceRun.self, ConformanceShow.self])
}

struct ConformanceRun: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run scenarios against an app server; exit status 0 only when every scenario passed.",
        discussion: """
            Each SUITE is `builtin` (the built-in suite for CCS app servers), `builtin-http` (the one for HTTP v1 \
            and legacy app servers), a scenario file (.json: one scenario or an array), or a \
            directory of them. For each scenario the runner starts a fresh emulator on 127.0.0.1 (state reset, \
            same CA), registers and connects the scenario's devices, starts --app-server-cmd with CCS_HOST, \
            CCS_PORT, CCS_SENDER_ID, CCS_SERVER_KEY, CCS_CA_FILE, FCM_HTTP_URL and CONFORMANCE_TOKENS in its \
            environment, waits for it to connect, runs the steps and judges the audit; then stops it (SIGTERM, \
            then SIGKILL after 5 s). In test mode the app server must answer an upstream message whose data has \
            send_to: TOKEN with one downstream message to TOKEN; nothing else is asked of it.

            HTTP scenarios ("app_server": "http", the builtin-http suite) wait for no connection: the runner \
            writes each send request to the app server's stdin as a JSON line {"send_to": TOKEN, "data": {...}, \
            "id": ID}, and adds GOOGLE_APPLICATION_CREDENTIALS, FCM_PROJECT_ID, FCM_SERVER_KEY, HTTPS_PROXY, \
            SSL_CERT_FILE and REQUESTS_CA_BUNDLE to the environment.

            Without --app-server-cmd the runner waits for an app server you run yourself: give fixed ports \
            (--ccs-port, --http-port) and --sender-id/--server-key, and start it with the printed environment; \
            it must reconnect when a scenario ends (every scenario has a fresh emulator).

            Example: ccs-emulator conformance run builtin --app-server-cmd "python3 my_app_server.py" --junit conformance.xml
            Example: ccs-emulator conformance run builtin-http --app-server-cmd "python3 my_v1_sender.py" --junit conformance.xml
            """)

    @Argument(help: "builtin, builtin-http, scenario files (.json) or directories of them.")
    var suites: [String] = []
    @Option(help: "Also run this suite (builtin, builtin-http, a file or a directory); the same as a SUITE argument.")
    var suite: [String] = []
    @Option(help: "The app server under test, run with /bin/sh -c for each scenario.")
    var appServerCmd: String?
    @Option(help: "Write JUnit XML here.")
    var junit: String?
    @Option(help: "Run only scenarios whose name contains this (repeat for several).")
    var filter: [String] = []
    @Option(help: "Data directory for the emulators (CA, databases, app-server logs). Default: a new temporary directory.")
    var dataDir: String?
    @Option(help: "The CCS port (0: a free port for each scenario).")
    var ccsPort = 0
    @Option(help: "The HTTP port (FCM_HTTP_URL; 0: a free port for each scenario).")
    var httpPort = 0
    @Option(help: "The sender ID the app server logs in with (default: a random one).")
    var senderId: String?
    @Option(help: "The server key (default: a random one).")
    var serverKey: String?
    @Option(help: "Seconds the app server may take to connect (1 to 600).")
    var startupTimeout = 30

    func validate() throws {
        guard !(suites + suite).isEmpty else { throw ValidationError("name at least one SUITE: builtin, builtin-http, a file or a directory") }
        guard (1...600).contains(startupTimeout) else { throw ValidationError("--startup-timeout must be 1 to 600 seconds") }
        for (name, port) in [("--ccs-port", ccsPort), ("--http-port", httpPort)] where !(0...65535).contains(port) {
            throw ValidationError("\(name) must be 0 to 65535")
        }
        if let senderId, senderId.isEmpty || senderId.count > 32 || !senderId.allSatisfy(\.isNumber) {
            throw ValidationError("--sender-id must be 1 to 32 digits")
        }
        if appServerCmd == nil, ccsPort == 0 {
            throw ValidationError("without --app-server-cmd, give --ccs-port (and --sender-id, --server-key) so that your app server knows where to connect")
        }
    }

    func run() async throws {
        var loaded: [(String, [Scenario])] = []
        for name in suites + suite {
            loaded.append((Self.suiteName(name), try Self.load(name)))
        }
        let dir = dataDir ?? NSTemporaryDirectory() + "ccs-conformance-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var options = ConformanceRunner.Options(appServerCommand: appServerCmd, dataDirectory: dir,
                                                senderID: senderId ?? String(Int.random(in: 100_000_000_000...999_999_999_999)),
                                                serverKey: serverKey ?? "conformance-" + UUID().uuidString)
        options.ccsPort = ccsPort
        options.httpPort = httpPort
        options.startupTimeoutMillis = startupTimeout * 1000
        let runner = ConformanceRunner(options: options) { try? FileHandle.standardError.write(contentsOf: Data(($0 + "\n").utf8)) }
        var results: [ScenarioResult] = []
        for (suiteName, scenarios) in loaded {
            for scenario in scenarios where filter.isEmpty || filter.contains(where: { scenario.name.contains($0) }) {
                let result = await runner.run(scenario, suite: suiteName)
                results.append(result)
                print(Self.summaryLine(result))
                if !result.passed {
                    for line in JUnitReport.details(result).split(separator: "\n", omittingEmptySubsequences: false) {
                        print("    " + line)
                    }
                }
            }
        }
        await runner.shutdown()
        let failed = results.filter { !$0.passed }.count
        print("\(results.count - failed) passed, \(failed) failed (\(results.count) scenarios; logs in \(dir))")
        if let junit {
            try JUnitReport.xml(results).write(toFile: junit, atomically: true, encoding: .utf8)
        }
        if failed > 0 || results.isEmpty { throw ExitCode(1) }
    }

    static func summaryLine(_ r: ScenarioResult) -> String {
        let rules = r.scenario.rules.map(\.rawValue).joined(separator: ", ")
        return "\(r.passed ? "PASS" : "FAIL") \(r.suite)/\(r.scenario.name)\(rules.isEmpty ? "" : " [\(rules)]") "
            + String(format: "%.1f s", r.seconds) + (r.failure.map { ": " + $0 } ?? "")
    }

    static func suiteName(_ name: String) -> String {
        [BuiltinSuite.name, BuiltinHTTPSuite.name].contains(name) ? name : URL(fileURLWithPath: name).deletingPathExtension().lastPathComponent
    }

    static func load(_ name: String) throws -> [Scenario] {
        if name == BuiltinSuite.name { return try BuiltinSuite.scenarios() }
        if name == BuiltinHTTPSuite.name { return try BuiltinHTTPSuite.scenarios() }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: name, isDirectory: &isDirectory) else {
            throw ValidationError("\(name): no such file or directory (and not \"builtin\" or \"builtin-http\")")
        }
        if isDirectory.boolValue {
            let files = try FileManager.default.contentsOfDirectory(atPath: name).filter { $0.hasSuffix(".json") }.sorted()
            return try files.flatMap { try loadFile(name + "/" + $0) }
        }
        return try loadFile(name)
    }

    static func loadFile(_ path: String) throws -> [Scenario] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let json: JSONValue
        do { json = try JSONValue.parse(text) } catch { throw ValidationError("\(path): not JSON: \(error)") }
        do {
            if let items = json.arrayValue {
                return try items.enumerated().map { i, item throws(ScenarioError) in try Scenario(json: item, source: "\(path)[\(i)]") }
            }
            return [try Scenario(json: json, source: path)]
        } catch {
            throw ValidationError("\(error)")
        }
    }
}

struct ConformanceShow: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Print a built-in suite's scenarios (JSON), as a start for your own.")

    @Argument(help: "builtin or builtin-http")
    var suite = BuiltinSuite.name

    func validate() throws {
        guard [BuiltinSuite.name, BuiltinHTTPSuite.name].contains(suite) else {
            throw ValidationError("only \"builtin\" and \"builtin-http\" can be shown")
        }
    }

    func run() throws {
        let json = suite == BuiltinHTTPSuite.name ? BuiltinHTTPSuite.json : BuiltinSuite.json
        print(json.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
