import ArgumentParser
import CCSProtocol
import DeviceSimulator
import Foundation
import NIOCore
import NIOPosix
import Synchronization

struct Device: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a simulated device: register, connect, print what arrives.",
        discussion: """
            Prints one JSON line per event on stdout: {"event":"registered","token":…} (after registering), \
            {"event":"connected"}, {"event":"message","message":{…}} (the message as the app sees it; the \
            device ACKs it right after printing), {"event":"offline"}, {"event":"disconnected"}, \
            {"event":"error","error":…}. Reads JSON-line commands on stdin: {"go":"offline"} closes the \
            connection, {"go":"online"} reconnects (and receives what was queued meanwhile). End of input: \
            disconnect and exit 0.
            """)

    @Option(help: "The emulator's HTTP base URL.")
    var emulator = "http://127.0.0.1:8080"
    @Option(help: "The app's package name.")
    var app: String
    @Option(name: .customLong("sender"), help: "A sender ID the app registers for (repeat for several, up to 100).")
    var senders: [String] = []
    @Option(help: "android or ios.")
    var platform = "android"
    @Option(help: "Reuse this existing registration instead of registering anew.")
    var token: String?

    func validate() throws {
        if token == nil && senders.isEmpty { throw ValidationError("give at least one --sender (or --token)") }
        if platform != "android" && platform != "ios" { throw ValidationError("--platform is android or ios") }
        if HTTPJSONClient.parseBaseURL(emulator) == nil { throw ValidationError("--emulator must look like http://HOST:PORT") }
    }

    func run() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let (host, port) = HTTPJSONClient.parseBaseURL(emulator)!
        let http = HTTPJSONClient(host: host, port: port, group: group)
        do {
            try await runDevice(http: http, group: group, host: host)
        } catch let error as HTTPJSONClient.Failure {
            emit(["event": .string("error"), "error": .string(error.description)])
            try? await group.shutdownGracefully()
            throw ExitCode(1)
        } catch {
            emit(["event": .string("error"), "error": .string("\(error)")])
            try? await group.shutdownGracefully()
            throw ExitCode(1)
        }
        try? await group.shutdownGracefully()
    }

    private func emit(_ fields: [String: JSONValue]) {
        Output.line(JSONValue.object(fields).encoded())
    }

    private func runDevice(http: HTTPJSONClient, group: MultiThreadedEventLoopGroup, host: String) async throws {
        guard case .object(let info) = try await http.getJSON("/emulator/v1/info"),
              case .int(let devicePort)? = info["device_port"] else {
            throw ValidationError("the emulator's /emulator/v1/info has no device_port")
        }
        let caPEM = try await http.request(.GET, "/emulator/v1/ca.pem").body

        let credentials: DeviceCredentials
        if let token {
            let json = try await http.getJSON("/emulator/v1/devices/\(token)")
            guard let c = DeviceCredentials(json: json) else { throw ValidationError("unexpected device record") }
            credentials = c
        } else {
            let json = try await http.postJSON("/emulator/v1/devices", .object([
                "app": .string(app), "senders": .array(senders.map { .string($0) }), "platform": .string(platform),
            ]))
            guard let c = DeviceCredentials(json: json) else { throw ValidationError("unexpected registration answer") }
            credentials = c
            emit(["event": .string("registered"), "token": .string(c.token), "device_id": .string(c.deviceID),
                  "app": .string(c.app), "senders": .array(c.senders.map { .string($0) }),
                  "platform": .string(c.platform)])
        }

        let commands = StdinCommands()
        var connection: DeviceConnection? = try await connect(host: host, port: Int(devicePort), caPEM: caPEM,
                                                               credentials: credentials, group: group)
        for await command in commands.stream {
            switch command {
            case .go("offline"):
                if let c = connection {
                    await c.close()
                    connection = nil
                }
                emit(["event": .string("offline")])
            case .go("online"):
                if connection == nil {
                    connection = try await connect(host: host, port: Int(devicePort), caPEM: caPEM,
                                                   credentials: credentials, group: group)
                }
            case .go(let other):
                emit(["event": .string("error"), "error": .string("unknown state \"\(other)\"")])
            case .invalid(let line):
                emit(["event": .string("error"), "error": .string("not a command: \(line)")])
            }
        }
        if let connection { await connection.close() }
    }

    private func connect(host: String, port: Int, caPEM: String, credentials: DeviceCredentials,
                         group: any EventLoopGroup) async throws -> DeviceConnection {
        try await DeviceConnection.connect(host: host, port: port, caPEM: caPEM, credentials: credentials,
                                           group: group) { event in
            switch event {
            case .connected:
                Output.line(#"{"event":"connected"}"#)
            case .message(let message):
                Output.line(JSONValue.object(["event": .string("message"), "message": message]).encoded())
            case .disconnected(let reason):
                var fields: [String: JSONValue] = ["event": .string("disconnected")]
                if let reason { fields["reason"] = .string(reason) }
                Output.line(JSONValue.object(fields).encoded())
            }
        }
    }
}

enum DeviceCommandLine: Sendable {
    case go(String)
    case invalid(String)
}

/// Reads JSON-line commands from stdin on a thread of its own.
final class StdinCommands: Sendable {
    let stream: AsyncStream<DeviceCommandLine>

    init() {
        let (stream, continuation) = AsyncStream.makeStream(of: DeviceCommandLine.self)
        self.stream = stream
        let thread = Thread {
            while let line = readLine() {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.isEmpty { continue }
                if case .object(let o)? = try? JSONValue.parse(trimmed), case .string(let state)? = o["go"] {
                    continuation.yield(.go(state))
                } else {
                    continuation.yield(.invalid(trimmed))
                }
            }
            continuation.finish()
        }
        thread.start()
    }
}
