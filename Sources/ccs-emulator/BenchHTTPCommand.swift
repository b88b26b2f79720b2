import ArgumentParser
import CCSEmulator
import CCSProtocol
import PushDomain
import DeviceSimulator
import Foundation
import GoogleAuth
import LoadGenerator
import NIOCore
import NIOPosix

/// `bench http-v1` and `bench http-legacy`: the FCM HTTP APIs under load, and in the same run the
/// requests/s the same HTTP server answers on a route that does no work (its ceiling).
struct HTTPBenchOptions: ParsableArguments {
    @Option(help: "Keep-alive HTTP connections that send.")
    var connections = 16
    @Option(help: "Simulated devices that receive (registered for the run).")
    var devices = 100
    @Flag(help: "HTTPS: send to the emulator's TLS port (embedded: --https-port 0; with --server, give --https-port).")
    var tls = false
    @Option(help: "With --server and --tls: the emulator's --https-port.")
    var httpsPort: Int?
    @Option(help: "Requests in flight per connection (1: one at a time, as real clients; more is HTTP pipelining). Replaces --window.")
    var pipeline = 1
    @Flag(help: "Skip the no-op phase (the server's ceiling). A --server emulator serves the no-op route only when started with --bench-routes.")
    var noCeiling = false
}

struct BenchHTTPV1: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http-v1",
        abstract: "HTTP v1 messages:send on keep-alive connections to connected simulated devices.",
        discussion: """
            Gets a service-account file (POST /emulator/v1/credentials) and an access token (/token) first. \
            Then --connections connections send {"message":{"token":…,"data":{…}}} round-robin to the devices, \
            --pipeline unanswered each (1: no pipelining, as real clients). Reports send→answer and send→device \
            latency, then the same load against POST /emulator/bench/noop (the HTTP server with no work).
            """)
    @OptionGroup(title: "HTTP") var http: HTTPBenchOptions
    @OptionGroup(title: "Emulator") var server: CCSServerOptions
    @OptionGroup(title: "Traffic") var traffic: TrafficOptions
    @OptionGroup(title: "Generator") var generator: RunOptions

    func validate() throws { try http.check(traffic) }

    func run() async throws { try await runHTTP(api: .v1, http, server.choice, traffic, generator) }
}

struct BenchHTTPLegacy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http-legacy",
        abstract: "The legacy POST /fcm/send (Authorization: key=) on keep-alive connections to connected simulated devices.",
        discussion: "As http-v1, with {\"to\":…,\"data\":{…}} bodies; an answer counts as accepted when its \"success\" is 1.")
    @OptionGroup(title: "HTTP") var http: HTTPBenchOptions
    @OptionGroup(title: "Emulator") var server: CCSServerOptions
    @OptionGroup(title: "Traffic") var traffic: TrafficOptions
    @OptionGroup(title: "Generator") var generator: RunOptions

    func validate() throws { try http.check(traffic) }

    func run() async throws { try await runHTTP(api: .legacy, http, server.choice, traffic, generator) }
}

extension HTTPBenchOptions {
    func check(_ traffic: TrafficOptions) throws {
        try requirePositive(connections, "--connections")
        try requirePositive(devices, "--devices")
        if !(1...1000).contains(pipeline) { throw ValidationError("--pipeline must be 1...1000") }
        if let p = httpsPort, !(1...65535).contains(p) { throw ValidationError("--https-port must be 1...65535") }
    }
}

/// The API phase, then the no-op phase with the same connections and traffic, on one emulator.
private func runHTTP(api: HTTPBenchAPI, _ http: HTTPBenchOptions, _ server: CCSServerChoice,
                     _ traffic: TrafficOptions, _ generator: RunOptions) async throws {
    var options = generator.options(connections: http.connections, devices: http.devices)
    traffic.apply(to: &options)
    // HTTP clients send one request at a time per connection unless asked to pipeline.
    options.window = http.pipeline
    let senderID = server.senderID ?? String(UInt64.random(in: 100_000_000_000...999_999_999_999))
    let helper = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    var embedded: EmbeddedBenchServer?
    let target: CCSTarget
    var httpsPort = http.httpsPort
    do {
        if server.embedded {
            let tls = http.tls
            let started = try await EmbeddedBenchServer.start { c in
                if tls { c.httpsPort = 0 }
                c.benchRoutes = true
            }
            embedded = started
            httpsPort = started.emulator.httpsPort
            target = started.target(senderID: senderID, serverKey: server.serverKey)
            options.serverPID = getpid()
            options.serverIsThisProcess = true
        } else {
            guard let (host, port) = HTTPJSONClient.parseBaseURL(server.server) else {
                throw ValidationError("--server must look like http://HOST:PORT")
            }
            if http.tls && httpsPort == nil { throw ValidationError("--tls with --server needs --https-port") }
            target = try await CCSTarget.discover(host: host, httpPort: port, senderID: senderID,
                                                  serverKey: server.serverKey, group: helper)
        }
        let authorization: String
        switch api {
        case .v1: authorization = "Bearer " + (try await accessToken(target, group: helper))
        case .legacy, .noop, .webpush: authorization = "key=" + server.serverKey
        }
        let port = http.tls ? httpsPort! : target.httpPort
        var results: [BenchResult] = []
        let first = BenchRunner(options: options)
        let outcome: Result<BenchResult, any Error>
        do { outcome = .success(try await first.httpSend(target, HTTPSendTarget(api: api, port: port, tls: http.tls, authorization: authorization))) } catch { outcome = .failure(error) }
        await first.shutdown()
        results.append(try outcome.get())
        if !http.noCeiling {
            let second = BenchRunner(options: options)
            let ceiling: Result<BenchResult, any Error>
            do { ceiling = .success(try await second.httpSend(target, HTTPSendTarget(api: .noop, port: port, tls: http.tls, authorization: nil))) } catch { ceiling = .failure(error) }
            await second.shutdown()
            results.append(try ceiling.get())
        }
        for r in results { Output.line(generator.json ? r.json : r.table) }
        if results.count == 2 {
            let rate = results[0].ackThroughput, ceiling = results[1].ackThroughput
            let ratio = ceiling > 0 ? rate / ceiling : 0
            Output.line(generator.json
                ? "{\"scenario\":\"http-\(api.rawValue)-vs-noop\",\"answered_per_second\":\(Int(rate)),\"noop_per_second\":\(Int(ceiling)),\"ratio\":\(BenchResult.fixed(ratio, 2))}"
                : "http-\(api.rawValue): \(BenchResult.group(Int(rate))) answered/s = \(BenchResult.fixed(ratio, 2))× the no-op route's \(BenchResult.group(Int(ceiling)))/s on the same server")
        }
    } catch {
        try? await helper.shutdownGracefully()
        await embedded?.stop()
        throw error
    }
    try? await helper.shutdownGracefully()
    await embedded?.stop()
}

/// A service-account file from the emulator, and an access token for it, as an admin SDK gets one.
private func accessToken(_ target: CCSTarget, group: any EventLoopGroup) async throws -> String {
    let client = HTTPJSONClient(host: target.host, port: target.httpPort, group: group)
    let file = try await client.postJSON("/emulator/v1/credentials", .object(["project_id": .string(target.senderID)]))
    let account = try ServiceAccountAssertion.Account(file: file)
    let assertion = try await ServiceAccountAssertion.sign(account, nowSeconds: Int(Date().timeIntervalSince1970))
    let answer = try await client.request(.POST, "/token", body: ServiceAccountAssertion.form(assertion),
                                          contentType: "application/x-www-form-urlencoded")
    guard answer.status == 200, let token = (try? JSONValue.parse(answer.body))?["access_token"]?.stringValue else {
        throw BenchError("no access token from /token: HTTP \(answer.status) \(answer.body)")
    }
    return token
}
