import ArgumentParser
import DeviceSimulator
import Foundation
import LoadGenerator
import NIOPosix

/// `bench web-push`: the emulator as Chrome's push service under load (docs/web-push.md).
struct BenchWebPush: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "web-push",
        abstract: "Web Push: encrypted, VAPID-signed POST /fcm/send/<id> to connected simulated browsers.",
        discussion: """
            --devices browsers subscribe with the emulator as their push service (POST \
            /emulator/v1/web-push/subscriptions) and connect; --connections keep-alive HTTP connections post \
            {"bt":…,"p":…} encrypted to each browser's keys (aes128gcm, RFC 8291) with one VAPID token \
            (RFC 8292), round-robin, --pipeline unanswered each. A push counts as accepted on its 201 and as \
            delivered once its browser has decrypted it and read the stamp (send→device includes both \
            encryption and decryption).
            """)
    @Option(help: "Keep-alive HTTP connections that post.")
    var connections = 16
    @Option(help: "Simulated browsers that receive (subscribed for the run).")
    var devices = 100
    @Option(help: "Requests in flight per connection (1: one at a time, as real clients).")
    var pipeline = 1
    @OptionGroup(title: "Emulator") var server: CCSServerOptions
    @OptionGroup(title: "Traffic") var traffic: TrafficOptions
    @OptionGroup(title: "Generator") var generator: RunOptions

    func validate() throws {
        try requirePositive(connections, "--connections")
        try requirePositive(devices, "--devices")
        if !(1...1000).contains(pipeline) { throw ValidationError("--pipeline must be 1...1000") }
        if server.deviceServer != nil { throw ValidationError("web-push does not take --device-server") }
    }

    func run() async throws {
        var options = generator.options(connections: connections, devices: devices)
        traffic.apply(to: &options)
        options.window = pipeline
        let choice = server.choice
        let senderID = choice.senderID ?? String(UInt64.random(in: 100_000_000_000...999_999_999_999))
        let helper = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var embedded: EmbeddedBenchServer?
        do {
            let target: CCSTarget
            if choice.embedded {
                let started = try await EmbeddedBenchServer.start { _ in }
                embedded = started
                target = started.target(senderID: senderID, serverKey: choice.serverKey)
                options.serverPID = getpid()
                options.serverIsThisProcess = true
            } else {
                guard let (host, port) = HTTPJSONClient.parseBaseURL(choice.server) else {
                    throw ValidationError("--server must look like http://HOST:PORT")
                }
                target = try await CCSTarget.discover(host: host, httpPort: port, senderID: senderID,
                                                      serverKey: choice.serverKey, group: helper)
            }
            let runner = BenchRunner(options: options)
            let outcome: Result<BenchResult, any Error>
            do { outcome = .success(try await runner.webPushSend(target)) } catch { outcome = .failure(error) }
            await runner.shutdown()
            let result = try outcome.get()
            Output.line(generator.json ? result.json : result.table)
        } catch {
            try? await helper.shutdownGracefully()
            await embedded?.stop()
            throw error
        }
        try? await helper.shutdownGracefully()
        await embedded?.stop()
    }
}
