import NIOCore
import NIOHTTP2

/// The state one connection's streams share, on the connection's event loop (its streams run there
/// too): the `ProviderConnection` and whether the server is stopping.
final class ProviderConnectionContext {
    /// Set at the TLS handshake (certificate or token); token until then, which cannot be used: no
    /// HTTP/2 frame arrives before the handshake is done.
    var connection = ProviderConnection(method: .token)
    /// The server is stopping: every new request is answered 503 `Shutdown`.
    var shuttingDown = false
    /// Names the connection in the journal and the fault log.
    let name: String

    init(name: String) {
        self.name = name
    }

    /// SETTINGS_MAX_CONCURRENT_STREAMS 1000 on the connection (`channel` is the connection's).
    static func openStreams(on channel: any Channel) {
        let settings = HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([
            HTTP2Setting(parameter: .maxConcurrentStreams, value: ProviderConnection.maximumConcurrentStreams),
        ])))
        channel.writeAndFlush(settings, promise: nil)
    }
}
