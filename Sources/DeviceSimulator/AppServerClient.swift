import CCSProtocol
import PushDomain
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import XMLStreaming

/// One app-server connection to CCS, as a real app server makes it: TLS from the first byte, the
/// stream header, SASL PLAIN `\0SENDER@gcm.googleapis.com\0KEY`, the stream restart, resource bind;
/// then `<message id=""><gcm xmlns="google:mobile:data">JSON</gcm></message>` both ways. Used by
/// `ccs-emulator send`; everything after the bind arrives as `events`.
public final class AppServerClient: Sendable {
    public enum Event: Sendable, Equatable {
        /// A `<message>` with a `<gcm xmlns="google:mobile:data">` payload: its JSON text, and parsed.
        /// ACKs, NACKs, receipts, upstream messages and control messages all arrive this way.
        case gcm(text: String, json: JSONValue)
        /// A `<message type="error">`: the error condition and its text.
        case stanzaError(condition: String, text: String)
        /// A timer from `startTimer` ran out.
        case timedOut
        /// The connection ended; the reason, unless it ended after our own `</stream:stream>`.
        case closed(reason: String?)
    }

    /// Why connecting or logging in failed, in words.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        /// The underlying NIO/TLS error, when there is one (for hints that depend on its kind).
        public var underlying: (any Error)?
        public init(_ description: String, underlying: (any Error)? = nil) {
            self.description = description
            self.underlying = underlying
        }
    }

    let channel: any Channel
    let continuation: AsyncStream<Event>.Continuation
    public let events: AsyncStream<Event>

    private init(channel: any Channel, events: AsyncStream<Event>, continuation: AsyncStream<Event>.Continuation) {
        self.channel = channel
        self.events = events
        self.continuation = continuation
    }

    /// Connects, authenticates and binds; returns once stanzas may be sent. `serverHostname` is the
    /// name checked against the certificate (nil: the certificate must cover the IP address).
    public static func connect(host: String, port: Int, caPEM: String, serverHostname: String?,
                               senderID: String, serverKey: String, group: any EventLoopGroup,
                               timeout: TimeAmount) async throws -> AppServerClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        do {
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(caPEM.utf8)))
        } catch {
            throw Failure("the CA file holds no PEM certificate")
        }
        let context = try NIOSSLContext(configuration: tls)
        let (events, continuation) = AsyncStream.makeStream(of: Event.self)
        let bound = group.next().makePromise(of: Void.self)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: group)
                .connectTimeout(timeout)
                .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            try NIOSSLClientHandler(context: context, serverHostname: serverHostname))
                        try channel.pipeline.syncOperations.addHandler(
                            AppServerClientHandler(senderID: senderID, serverKey: serverKey, bound: bound,
                                                   events: continuation))
                    }
                }
                .connect(host: host, port: port).get()
        } catch {
            bound.fail(error)
            throw Failure("cannot connect to \(host):\(port): \(ConnectionFailure.describe(error))", underlying: error)
        }
        // TLS, login and bind must finish in time too: a port that accepts and stays silent is no CCS.
        let seconds = Double(timeout.nanoseconds) / 1e9
        let shown = seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
        let expiry = channel.eventLoop.scheduleTask(in: timeout) {
            bound.fail(Failure("no CCS session within \(shown) s (TLS, login and bind did not finish)"))
            channel.close(promise: nil)
        }
        channel.closeFuture.whenComplete { _ in
            bound.fail(Failure("the connection closed before the session was established"))
        }
        do {
            try await bound.futureResult.get()
            expiry.cancel()
        } catch let failure as Failure {
            expiry.cancel()
            try? await channel.close()
            throw failure
        } catch {
            expiry.cancel()
            try? await channel.close()
            throw Failure(ConnectionFailure.describe(error), underlying: error)
        }
        return AppServerClient(channel: channel, events: events, continuation: continuation)
    }

    /// Sends one downstream message or ACK: `json` goes inside `<gcm>`, escaped.
    public func send(gcm json: String) {
        let text = "<message id=\"\"><gcm xmlns=\"google:mobile:data\">\(XMLEscaping.escapeText(json))</gcm></message>"
        channel.writeAndFlush(ByteBuffer(string: text), promise: nil)
    }

    /// Puts `.timedOut` into `events` after `amount`, unless cancelled first.
    public func startTimer(_ amount: TimeAmount) -> Scheduled<Void> {
        let continuation = self.continuation
        return channel.eventLoop.scheduleTask(in: amount) { continuation.yield(.timedOut) }
    }

    /// Ends the stream as a polite app server does: `</stream:stream>`, then waits (at most `grace`)
    /// for the server's own closing tag, and closes the socket.
    public func close(grace: TimeAmount = .seconds(2)) async {
        let channel = self.channel
        try? await channel.eventLoop.submit {
            if let handler = try? channel.pipeline.syncOperations.handler(type: AppServerClientHandler.self) {
                handler.sendClose()
            }
        }.get()
        let forced = channel.eventLoop.scheduleTask(in: grace) { channel.close(promise: nil) }
        try? await channel.closeFuture.get()
        forced.cancel()
    }
}

/// The client side of the CCS port: stream, SASL PLAIN, restart, bind; then `<message>`s become events.
final class AppServerClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let senderID: String
    let bound: EventLoopPromise<Void>
    let events: AsyncStream<AppServerClient.Event>.Continuation
    let parser = XMLStreamParser(limits: .postAuth)
    var login: ClientLogin
    var context: ChannelHandlerContext?
    var closeReason: String?
    var closingByClient = false

    init(senderID: String, serverKey: String, bound: EventLoopPromise<Void>,
         events: AsyncStream<AppServerClient.Event>.Continuation) {
        self.senderID = senderID
        self.bound = bound
        self.events = events
        login = ClientLogin(domain: "gcm.googleapis.com", plain: "\0\(senderID)@gcm.googleapis.com\0\(serverKey)",
                            resource: nil)
        parser.pauseAfter = ClientLogin.pausesParser(after:)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func channelActive(context: ChannelHandlerContext) {
        send(login.streamHeader)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        let reason = closingByClient ? nil : (closeReason ?? "the server closed the connection")
        bound.fail(AppServerClient.Failure(reason ?? "the connection closed before the session was established"))
        events.yield(.closed(reason: reason))
        events.finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if login.phase != .connected {
            bound.fail(AppServerClient.Failure(ConnectionFailure.describe(error), underlying: error))
        }
        if closeReason == nil && !closingByClient { closeReason = ConnectionFailure.describe(error) }
        context.close(promise: nil)
    }

    func sendClose() {
        guard !closingByClient else { return }
        closingByClient = true
        send("</stream:stream>")
    }

    private func send(_ text: String) {
        guard let context else { return }
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: text)), promise: nil)
    }

    private func fail(_ reason: String, context: ChannelHandlerContext) {
        bound.fail(AppServerClient.Failure(reason))
        closeReason = closeReason ?? reason
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        do {
            for event in try buffer.withUnsafeReadableBytes({ try parser.feedRestarting($0) }) {
                handle(event, context: context)
            }
        } catch {
            fail("invalid XML from the server: \(error)", context: context)
        }
    }

    private func handle(_ event: XMLStreamEvent, context: ChannelHandlerContext) {
        switch event {
        case .streamOpen:
            break
        case .streamClose:
            if !closingByClient { closeReason = closeReason ?? "the server closed the stream" }
            context.close(promise: nil)
        case .stanza(let stanza):
            for action in login.received(stanza) {
                switch action {
                case .send(let text): send(text)
                case .connected: bound.succeed(())
                case .refused(let reason): fail("authentication as sender \(senderID) failed: \(reason)", context: context)
                case .fail(let reason): fail(reason, context: context)
                case .stanza(let stanza): sessionStanza(stanza)
                }
            }
        }
    }

    /// After the bind: ACKs, NACKs, receipts, upstream and control messages, and stanza errors.
    private func sessionStanza(_ stanza: XMLElement) {
        guard stanza.name == "message" else { return }
        if stanza.attribute("type") == "error" {
            let error = stanza.firstChild(named: "error")
            let condition = error?.childElements.first(where: { $0.name != "text" })?.name ?? "unknown"
            events.yield(.stanzaError(condition: condition, text: error?.firstChild(named: "text")?.text ?? ""))
            return
        }
        guard let gcm = stanza.firstChild(named: "gcm", namespace: "google:mobile:data") else { return }
        let text = gcm.text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let json = try? JSONValue.parse(text) else { return }
        events.yield(.gcm(text: text, json: json))
    }
}
