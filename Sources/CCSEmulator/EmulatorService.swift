import ServiceLifecycle

/// A part of a running emulator that was started (bound, opened) before the group ran: it waits for
/// the group's graceful shutdown, then stops its part and returns. Cancellation stops it too, so a
/// cancelled group still closes what is open.
struct StopOnShutdown: Service, CustomStringConvertible {
    let description: String
    let stop: @Sendable () async -> Void

    init(_ name: String, stop: @escaping @Sendable () async -> Void) {
        self.description = name
        self.stop = stop
    }

    func run() async throws {
        try? await gracefulShutdown()
        await stop()
    }
}
