import APNsGateway
import Locking
import NIOCore
import NIOHTTP2
import NIOSSL
import NIOTLS
import X509

/// Sits between TLS and HTTP/2 on a connection: at the handshake it fixes the authentication method
/// (a client certificate from the CA, else provider tokens); at a graceful stop it tells the
/// provider (GOAWAY) and answers what still comes with 503 `Shutdown`.
final class ProviderConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = NIOAny

    let shared: ProviderConnectionContext
    private let connections: ProviderConnections

    init(shared: ProviderConnectionContext, connections: ProviderConnections) {
        self.shared = shared
        self.connections = connections
    }

    func handlerAdded(context: ChannelHandlerContext) { connections.add(context.channel) }

    func channelInactive(context: ChannelHandlerContext) {
        connections.remove(context.channel)
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted? = event as? TLSUserEvent {
            let certificate = try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self).peerCertificate
            shared.connection = ProviderConnection(method: Self.method(certificate))
            // A certificate authenticated the connection: every stream Apple allows, at once.
            if shared.connection.streamsOpen { ProviderConnectionContext.openStreams(on: context.channel) }
        } else if event is ProviderShutdown {
            // What still arrives is answered 503 Shutdown until the GOAWAY.
            shared.shuttingDown = true
            return
        } else if event is ProviderGoAway {
            // From the channel's tail, through the HTTP/2 handler that sits after this one.
            let reason = context.channel.allocator.buffer(string: #"{"reason":"Shutdown"}"#)
            let channel = context.channel
            channel.writeAndFlush(HTTP2Frame(
                streamID: .rootStream, payload: .goAway(lastStreamID: .maxID, errorCode: .noError, opaqueData: reason))
            ).whenComplete { _ in channel.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// A certificate names the app (subject UID) and, by its common name, whether it is a
    /// development one; no certificate: the connection uses provider tokens.
    static func method(_ certificate: NIOSSLCertificate?) -> ProviderConnection.Method {
        guard let certificate else { return .token }
        let bundleID: String?
        if case .bundleID(let id) = ProviderCertificate.topic(of: certificate) { bundleID = id } else { bundleID = nil }
        var sandboxOnly = false
        if let der = try? certificate.toDERBytes(), let parsed = try? Certificate(derEncoded: der) {
            // Apple named development certificates "Apple Development IOS Push Services: <bundle id>".
            sandboxOnly = parsed.subject.contains { rdn in
                rdn.contains { $0.type == .RDNAttributeType.commonName
                    && String($0.value)?.hasPrefix("Apple Development IOS Push Services") == true }
            }
        }
        return .certificate(.init(bundleID: bundleID, sandboxOnly: sandboxOnly))
    }
}

/// Fired on each open connection when the server stops.
struct ProviderShutdown: Sendable {}

/// Fired on each open connection when the stopping server's grace period is over: GOAWAY, close.
struct ProviderGoAway: Sendable {}

/// The open connections, so that a stopping server can tell each one.
final class ProviderConnections: Sendable {
    private let channels = Locked<[ObjectIdentifier: any Channel]>([:])
    private let counter = Locked<Int>(0)

    func add(_ channel: any Channel) { channels.withLock { $0[ObjectIdentifier(channel)] = channel } }
    func remove(_ channel: any Channel) { channels.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(channel)) } }
    var all: [any Channel] { channels.withLock { Array($0.values) } }
    func nextName() -> String { counter.withLock { $0 += 1; return "h2-\($0)" } }
}
