import Locking
import NIOCore
import ServiceLifecycle

/// A listener bound after the group started (the proxy, whose tunnels lead to the TLS listener's port,
/// known only once that server runs), stopped in its phase like the others: `adopt` hands it over,
/// and a listener handed over after the stop is closed at once.
final class LateListener: Service, CustomStringConvertible, Sendable {
    let description: String
    private let state = Locked<(channel: (any Channel)?, stopped: Bool)>((nil, false))

    init(_ name: String) { description = name }

    func adopt(_ channel: any Channel) async {
        let keep = state.withLock { s -> Bool in
            if s.stopped { return false }
            s.channel = channel
            return true
        }
        if !keep { try? await channel.close() }
    }

    func run() async throws {
        try? await gracefulShutdown()
        let channel = state.withLock { s -> (any Channel)? in
            s.stopped = true
            return s.channel
        }
        try? await channel?.close()
    }
}
