import ArgumentParser

/// The load both APNs benchmarks put on the emulator (`bench apns`, `bench apns-http2`): provider
/// connections, the online iOS devices the notifications cycle through, how many, how fast.
struct APNsBenchLoad: ParsableArguments {
    @Option(help: "Provider connections (TLS; HTTP/2 with one provider token each for apns-http2).")
    var connections = 4
    @Option(help: "Online iOS devices the notifications cycle through.")
    var devices = 100
    @Option(help: "Notifications in total.")
    var notifications = 200_000
    @Option(help: "Notifications per second in total (open loop); default: as fast as the server takes them.")
    var rate: Double?
    @Option(help: "Event-loop threads of the generator's provider connections.")
    var threads = 1
    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    func validate() throws {
        guard (1...1000).contains(connections) else { throw ValidationError("--connections must be 1 … 1000") }
        guard (1...100_000).contains(devices) else { throw ValidationError("--devices must be 1 … 100000") }
        guard (1...100_000_000).contains(notifications) else { throw ValidationError("--notifications must be 1 … 100000000") }
        if let rate, !(rate.isFinite && rate > 0 && rate <= 10_000_000) { throw ValidationError("--rate must be 0 … 10000000") }
        guard (1...64).contains(threads) else { throw ValidationError("--threads must be 1 … 64") }
    }
}
