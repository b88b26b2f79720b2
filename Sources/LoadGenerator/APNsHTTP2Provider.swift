import Crypto
import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// One provider connection to the APNs HTTP/2 provider API for `bench apns-http2`: TLS with ALPN h2,
/// a provider token (ES256) on every request, as many streams in flight as the server allows (one
/// until the first answer, as APNs requires), each payload carrying its write time.
public final class APNsHTTP2Provider: Sendable {
    public struct Plan: Sendable {
        /// 64-hex-digit device tokens to cycle through.
        public var tokens: [String]
        public var topic: String
        /// `authorization` value: `bearer <JWT>`.
        public var authorization: String
        public var count: Int
        /// Per second for this connection; nil: as fast as the streams allow.
        public var rate: Double?
        /// Streams in flight at most once the server allows more than one (APNs allows 1,000; more than
        /// about 100 only queues in the client, whose stream lookups are linear).
        public var window = 100

        public init(tokens: [String], topic: String, authorization: String, count: Int, rate: Double?) {
            self.tokens = tokens
            self.topic = topic
            self.authorization = authorization
            self.count = count
            self.rate = rate
        }
    }

    public final class Progress: Sendable {
        public let sent = Atomic<Int>(0)
        public let accepted = Atomic<Int>(0)
        public let refused = Atomic<Int>(0)
    }

    public let progress: Progress
    private let done: EventLoopPromise<Void>
    private let channel: any Channel

    private init(channel: any Channel, done: EventLoopPromise<Void>, progress: Progress) {
        self.channel = channel
        self.done = done
        self.progress = progress
    }

    /// A provider token as Apple documents it: `{alg: ES256, kid}.{iss, iat}`, signed with the key.
    public static func providerToken(p8PEM: String, keyID: String, teamID: String, issuedAt: Int64) throws -> String {
        let key = try P256.Signing.PrivateKey(pemRepresentation: p8PEM)
        func b64(_ d: Data) -> String {
            d.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let signed = b64(Data(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8)) + "."
            + b64(Data(#"{"iss":"\#(teamID)","iat":\#(issuedAt)}"#.utf8))
        return signed + "." + b64(try key.signature(for: Data(signed.utf8)).rawRepresentation)
    }

    public static func connect(host: String, port: Int, plan: Plan, group: any EventLoopGroup) async throws -> APNsHTTP2Provider {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none  // the bench measures the emulator, not the trust setup
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        let loop = group.next()
        let done = loop.makePromise(of: Void.self)
        let progress = Progress()
        let channel = try await ClientBootstrap(group: loop)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(try NIOSSLClientHandler(context: context, serverHostname: "localhost"))
                    let multiplexer = try sync.configureHTTP2Pipeline(
                        mode: .client, connectionConfiguration: .init(), streamConfiguration: .init()) { stream in
                        stream.eventLoop.makeSucceededVoidFuture()
                    }
                    try sync.addHandler(Sender(plan: plan, multiplexer: multiplexer, loop: channel.eventLoop, done: done,
                                                  progress: progress))
                }
            }
            .connect(host: host, port: port).get()
        return APNsHTTP2Provider(channel: channel, done: done, progress: progress)
    }

    /// Completes when every notification is answered (or the connection closed).
    public func finished() async throws { try await done.futureResult.get() }

    public func close() async { try? await channel.close() }
}
