import APNsGateway
import AppServerAudit
import CCSEmulator
import CCSEngine
import StoreModel
import FaultInjection
import Foundation
import GoogleAuth
import Logging
import NIOCore
import NIOPosix
import PushDomain

/// What one scenario came to.
public struct ScenarioResult: Sendable {
    public var suite: String
    public var scenario: Scenario
    public var passed: Bool
    /// Why it failed: the step and what was missing.
    public var failure: String?
    public var seconds: Double
    /// Every audit finding about the app server during the scenario.
    public var findings: [AuditFinding]
    public var appServerLog: String

    public init(suite: String, scenario: Scenario, passed: Bool, failure: String?, seconds: Double,
                findings: [AuditFinding], appServerLog: String) {
        self.suite = suite
        self.scenario = scenario
        self.passed = passed
        self.failure = failure
        self.seconds = seconds
        self.findings = findings
        self.appServerLog = appServerLog
    }
}

/// Runs scenarios against an app server: for each one a fresh emulator (same data directory, so the
/// same CA; state reset), the scenario's devices, the app server started with the contract's
/// environment, the steps, then the audit (docs/conformance.md).
public final class ConformanceRunner: Sendable {
    public struct Options: Sendable {
        /// Started for each scenario (`/bin/sh -c`); nil: an app server the user runs connects by itself.
        public var appServerCommand: String?
        public var dataDirectory: String
        public var ccsPort = 0
        public var devicePort = 0
        public var httpPort = 0
        public var senderID: String
        public var serverKey: String
        /// How long the app server may take to connect.
        public var startupTimeoutMillis = 30_000

        public init(appServerCommand: String?, dataDirectory: String, senderID: String, serverKey: String) {
            self.appServerCommand = appServerCommand
            self.dataDirectory = dataDirectory
            self.senderID = senderID
            self.serverKey = serverKey
        }
    }

    let options: Options
    let group: MultiThreadedEventLoopGroup
    /// Progress lines (the command prints them); the report comes from the results.
    let say: @Sendable (String) -> Void

    public init(options: Options, say: @escaping @Sendable (String) -> Void) {
        self.options = options
        self.say = say
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    }

    public func shutdown() async {
        try? await group.shutdownGracefully()
    }

    struct StepFailure: Error, CustomStringConvertible {
        var description: String
    }

    public func run(_ scenario: Scenario, suite: String) async -> ScenarioResult {
        let started = ContinuousClock.now
        var failure: String?
        var findings: [AuditFinding] = []
        var log = ""
        var config = EmulatorConfiguration()
        config.dataDirectory = options.dataDirectory
        config.ccsPort = options.ccsPort
        config.devicePort = options.devicePort
        config.httpPort = options.httpPort
        config.apns.gatewayPort = 0
        config.apns.feedbackPort = 0
        config.apnsHTTP2.port = 0
        config.clock = scenario.clock == .virtual ? .virtual : .wall
        // HTTP app servers may reach Google's hosts through proxy mode instead of FCM_HTTP_URL.
        if scenario.appServer == .http { config.proxyPort = 0 }
        config.resetState = true
        config.eventLoopThreads = 1
        var quiet = Logger(label: "ccs.conformance.emulator")
        quiet.logLevel = .critical
        do {
            let emulator = try await Emulator.start(config, logger: quiet)
            var devices: [SimulatedDevice] = []
            var appServer: AppServerProcess?
            do {
                devices = try await registerAndConnect(scenario.devices, emulator)
                appServer = try launchAppServer(emulator, devices: devices, scenario: scenario)
                if scenario.appServer == .ccs { try await waitForAppServer(emulator, appServer) }
                var run = Steps(runner: self, emulator: emulator, devices: devices, appServer: appServer, scenario: scenario)
                try await run.perform()
            } catch let error as StepFailure {
                failure = error.description
            } catch {
                failure = "\(error)"
            }
            // A send answered after the scenario's last fact (its delivery can come first) still
            // counts: its answer is what tells the audit about it.
            _ = await waitUntil(options.startupTimeoutMillis) { emulator.engine.audit.openHTTPRequests == 0 }
            findings = emulator.engine.audit.findings(sender: options.senderID)
            if failure == nil { failure = Steps.brokenRules(scenario, findings) }
            await appServer?.stop()
            log = appServer?.logTail() ?? ""
            for d in devices { await d.disconnect() }
            await emulator.shutdown()
        } catch {
            failure = "the emulator did not start: \(error)"
        }
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return ScenarioResult(suite: suite, scenario: scenario, passed: failure == nil, failure: failure, seconds: seconds,
                              findings: findings, appServerLog: log)
    }

    func registerAndConnect(_ names: [String], _ emulator: Emulator) async throws -> [SimulatedDevice] {
        var devices: [SimulatedDevice] = []
        for name in names {
            let record = try await emulator.engine.registerDevice(app: "com.example.conformance", senders: [options.senderID],
                                                                  platform: .android)
            let device = SimulatedDevice(name: name, record: record)
            try await device.connect(host: "127.0.0.1", port: emulator.info.devicePort, caPEM: emulator.info.caCertPEM, group: group)
            devices.append(device)
        }
        return devices
    }

    /// The contract's environment (docs/conformance.md); HTTP scenarios add the HTTP contract's.
    func environment(_ emulator: Emulator, devices: [SimulatedDevice], scenario: Scenario) throws -> [String: String] {
        var env = [
            "CCS_HOST": "127.0.0.1",
            "CCS_PORT": String(emulator.info.ccsPort),
            "CCS_SENDER_ID": options.senderID,
            "CCS_SERVER_KEY": options.serverKey,
            "CCS_CA_FILE": emulator.info.caCertPath,
            "FCM_HTTP_URL": "http://127.0.0.1:\(emulator.info.httpPort)",
            "CONFORMANCE_TOKENS": devices.map(\.token).joined(separator: ","),
        ]
        if scenario.appServer == .http { env.merge(try httpEnvironment(emulator)) { _, http in http } }
        return env
    }

    /// A service-account file of the sender's project (its number: the project that names the
    /// sender), its token_uri on this emulator; the server key; and proxy mode's settings.
    func httpEnvironment(_ emulator: Emulator) throws -> [String: String] {
        let keys = try ServiceAccountKeyStore(directory: options.dataDirectory + "/credentials")
        let file = try keys.issue(projectID: options.senderID, tokenURI: "http://127.0.0.1:\(emulator.info.httpPort)/token",
                                  nowMillis: Int64(Date().timeIntervalSince1970 * 1000))
        let path = options.dataDirectory + "/service-account.json"
        try ServiceAccountKeyStore.serviceAccountText(file).write(toFile: path, atomically: true, encoding: .utf8)
        var env = [
            "GOOGLE_APPLICATION_CREDENTIALS": path,
            "FCM_PROJECT_ID": options.senderID,
            "FCM_SERVER_KEY": options.serverKey,
            "SSL_CERT_FILE": emulator.info.caCertPath,
            "REQUESTS_CA_BUNDLE": emulator.info.caCertPath,
        ]
        if let proxy = emulator.proxyPort { env["HTTPS_PROXY"] = "http://127.0.0.1:\(proxy)" }
        return env
    }

    func launchAppServer(_ emulator: Emulator, devices: [SimulatedDevice], scenario: Scenario) throws -> AppServerProcess? {
        let env = try environment(emulator, devices: devices, scenario: scenario)
        guard let command = options.appServerCommand else {
            if scenario.appServer == .http {
                throw StepFailure(description: "HTTP scenarios need --app-server-cmd: the runner writes its send requests to the app server's stdin")
            }
            say("waiting for the app server: " + env.keys.sorted().map { "\($0)=\(env[$0]!)" }.joined(separator: " "))
            return nil
        }
        let logURL = URL(fileURLWithPath: options.dataDirectory).appendingPathComponent("app-server.\(scenario.name).log")
        return try AppServerProcess(command: command, environment: env, logURL: logURL, stdinPipe: scenario.appServer == .http)
    }

    func waitForAppServer(_ emulator: Emulator, _ process: AppServerProcess?) async throws {
        let engine = emulator.engine, sender = options.senderID
        let connected = await waitUntil(options.startupTimeoutMillis) {
            if let process, !process.isRunning { return true }
            return engine.connectionCount(senderID: sender) > 0
        }
        if let process, !process.isRunning {
            throw StepFailure(description: "the app server exited (status \(process.exitStatus)) before it connected")
        }
        guard connected else {
            throw StepFailure(description: "the app server did not connect to CCS within \(options.startupTimeoutMillis) ms")
        }
    }

    /// Polls a fact every 20 ms until it holds or the time is up (bounded; never a bare sleep).
    func waitUntil(_ millis: Int, _ fact: @Sendable () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(millis)
        while true {
            if fact() { return true }
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
}
