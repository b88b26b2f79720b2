import DeliveryCore
import CCSEngine
import CCSProtocol
import PushDomain
import StoreModel
import Logging
import NIOCore
import Synchronization
import XMLStreaming

/// Which endpoint a connection came in on.
public enum ConnectionRole: Sendable {
    /// Port 5235: app servers speaking CCS.
    case appServer
    /// Port 5228: simulated devices.
    case device
}

/// The thin NIO adapter: bytes in → expat events → `StreamNegotiation` → role logic → bytes out.
/// Runs on its channel's event loop only; the engine reaches it through `ConnectionLink`.
final class XMPPConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let role: ConnectionRole
    let engine: Engine
    let configuration: XMPPServerConfiguration
    let logger: Logger
    let parser: XMLStreamParser
    var negotiation: StreamNegotiation
    var context: ChannelHandlerContext?
    var link: ConnectionLink?
    var authTimeout: Scheduled<Void>?
    var drainClose: Scheduled<Void>?
    /// The pending idle check (see `XMPPServerConfiguration.idleParserRelease`), and whether
    /// anything was read since the last one.
    var idleCheck: Scheduled<Void>?
    var readSinceIdleCheck = false
    var closing = false
    /// Set while the app server has ended its stream and downstream messages are still being
    /// answered: the stream is ended (and the connection closed) once the last ACK/NACK is written,
    /// or when this runs out.
    var peerEndTimeout: Scheduled<Void>?
    /// This handler as the event loop's closures hold it: weakly (see `WeakHandler`). Made once.
    var weakSelf: NIOLoopBound<WeakHandler>?
    /// Written since the last flush, and registered with the mailbox for one.
    var flushPending = false
    /// Output not yet handed to the pipeline (see `write(_:)`).
    var output: ByteBuffer?
    let mailbox: LoopMailbox
    /// Reused storage for the parser's event list.
    var eventStorage: [XMLStreamEvent] = []
    var remoteAddress = "?"
    /// A read the channel asked for while its output was over the high-water mark: held back until the
    /// peer has taken what it was sent (a peer that never reads stops being read).
    var heldRead = false
    /// Connections closed because their peer let more than `maxBufferedOutput` pile up.
    static let closedForUnreadOutput = Atomic<Int>(0)
    /// The session is registered with the engine (once, even if a client binds twice).
    var registered = false
    /// App server: the sender ID. Device: the token.
    var principal: String?

    init(role: ConnectionRole, engine: Engine, configuration: XMPPServerConfiguration, logger: Logger,
         mailbox: LoopMailbox) {
        self.role = role
        self.mailbox = mailbox
        self.engine = engine
        self.configuration = configuration
        self.logger = logger
        self.parser = XMLStreamParser(limits: configuration.preAuthLimits)
        self.negotiation = StreamNegotiation(jidDomain: role == .appServer ? "gcm.googleapis.com" : "devices.ccs-emulator")
        parser.pauseAfter = { $0.name == "auth" }
    }

    /// Parsers freed by idle connections since the process started (see `MemoryTrimmer`).
    static let parsersReleased = Atomic<Int>(0)

    // MARK: channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let bound = NIOLoopBound(WeakHandler(self), eventLoop: context.eventLoop)
        weakSelf = bound
        link = ConnectionLink(handler: bound, mailbox: mailbox)
        remoteAddress = context.channel.remoteAddress?.description ?? "?"
        authTimeout = context.eventLoop.scheduleTask(in: configuration.authenticationTimeout) {
            guard let handler = bound.value.handler else { return }
            if !handler.negotiation.isAuthenticated {
                handler.perform(handler.negotiation.streamError("connection-timeout"))
            }
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        authTimeout?.cancel()
        peerEndTimeout?.cancel()
        idleCheck?.cancel()
        idleCheck = nil
        drainClose?.cancel()
        unregisterSession()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        logger.debug("connection error", metadata: ["remote": "\(remoteAddress)", "error": "\(error)"])
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        let buffer = unwrapInboundIn(data)
        // The event list's storage is kept between reads (taken out while in use: handling an event
        // may read again only through a later channelRead, never re-entrantly, but stay safe).
        var events = eventStorage
        eventStorage = []
        defer {
            events.removeAll(keepingCapacity: true)
            eventStorage = events
        }
        do {
            try buffer.withUnsafeReadableBytes { try parser.feed($0, into: &events) }
            while true {
                for event in events {
                    handle(event)
                    if closing { return }
                }
                guard parser.isPaused, negotiation.phase == .awaitingRestart else { break }
                parser.reset()
                try parser.feed(UnsafeRawBufferPointer(start: nil, count: 0), into: &events)
            }
        } catch let error as XMLStreamError {
            perform(negotiation.parseFailed(error))
        } catch {
            perform(negotiation.streamError("internal-server-error"))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flushOutput()
        readSinceIdleCheck = true
        if idleCheck == nil, negotiation.isAuthenticated, !closing { scheduleIdleCheck(context: context) }
    }

    /// Frees the parser of a connection that stays quiet (it comes back with the next bytes).
    private func scheduleIdleCheck(context: ChannelHandlerContext) {
        guard let delay = configuration.idleParserRelease, let bound = weakSelf else { return }
        idleCheck = context.eventLoop.scheduleTask(in: delay) {
            guard let handler = bound.value.handler else { return }
            handler.idleCheck = nil
            guard !handler.closing, let context = handler.context else { return }
            if handler.readSinceIdleCheck || !handler.parser.hibernate() {
                handler.readSinceIdleCheck = false
                handler.scheduleIdleCheck(context: context)
            } else {
                handler.eventStorage = []
                XMPPConnectionHandler.parsersReleased.add(1, ordering: .relaxed)
            }
        }
    }

    // MARK: events → actions

    private func handle(_ event: XMLStreamEvent) {
        switch event {
        case .streamOpen(let header): perform(negotiation.streamOpened(header))
        case .stanza(let stanza): perform(negotiation.stanzaReceived(stanza))
        case .streamClose:
            if role == .appServer, let link, let context, let bound = weakSelf, link.pendingCount > 0 {
                // A client that sends `</stream:stream>` right after its last message still gets
                // that message's answer (the README's openssl pipe does exactly this).
                peerEndTimeout = context.eventLoop.scheduleTask(in: configuration.peerEndGracePeriod) {
                    bound.value.handler?.finishPeerEndedStream()
                }
                return
            }
            perform(negotiation.streamClosed())
        }
    }

    func perform(_ actions: [StreamNegotiation.Action]) {
        for action in actions {
            switch action {
            case .write(let text):
                write(text)
            case .authenticate(let credentials):
                perform(authenticate(credentials))
            case .restartParser:
                break // the parser pauses after <auth> by itself; channelRead resets it
            case .useAuthenticatedLimits:
                parser.limits = configuration.postAuthLimits
                authTimeout?.cancel()
                authTimeout = nil  // the task and its closure are not kept for the connection's life
            case .bound(_, let reply, let refusal):
                if sessionEstablished() {
                    write(reply)
                    registerSession()
                } else {
                    write(refusal)
                    perform(negotiation.streamError("resource-constraint", text: "too many connections for this sender"))
                }
            case .stanza(let stanza):
                switch role {
                case .appServer: appServerStanza(stanza)
                case .device: deviceStanza(stanza)
                }
            case .close:
                close()
            }
            if closing { return }
        }
    }

    private func authenticate(_ credentials: SASLCredentials) -> [StreamNegotiation.Action] {
        let user = credentials.localpart
        switch role {
        case .appServer:
            if case .refused(let reason) = engine.checkAppServer(senderID: user, key: credentials.password) {
                logger.notice("app server login refused: \(reason)", metadata: ["remote": "\(remoteAddress)"])
                return negotiation.authenticationFailed(text: reason)
            }
            principal = user
        case .device:
            guard let device = engine.authenticateDevice(deviceID: user, secret: credentials.password) else {
                let reason = Self.deviceLoginRefusal(credentials, ccsPort: configuration.appServerPort)
                logger.notice("device login refused: \(reason)", metadata: ["remote": "\(remoteAddress)"])
                return negotiation.authenticationFailed(text: reason)
            }
            principal = device.token
        }
        return negotiation.authenticationSucceeded(username: user)
    }

    /// Why the device channel refused a login. An app server that dialled this port by mistake logs
    /// in with a sender ID (digits, often `@gcm.googleapis.com`): tell it where to go instead.
    static func deviceLoginRefusal(_ credentials: SASLCredentials, ccsPort: Int?) -> String {
        let user = credentials.localpart
        let looksLikeAppServer = credentials.authcid.hasSuffix("@gcm.googleapis.com")
            || credentials.authzid.hasSuffix("@gcm.googleapis.com")
            || (!user.isEmpty && user.count != 16 && user.utf8.allSatisfy { $0 >= 48 && $0 <= 57 })
        if looksLikeAppServer {
            let port = ccsPort.map { "port \($0)" } ?? "its port (--ccs-port, default 5235)"
            return "this is the device channel for simulated devices; app servers connect to the CCS port, \(port)"
        }
        return "unknown device or wrong device secret (log in with the device_id and device_secret of POST /emulator/v1/devices)"
    }

    /// Whether the role takes this session (an app server may be over its sender's connection cap).
    private func sessionEstablished() -> Bool {
        guard role == .appServer, !registered, let principal else { return true }
        return engine.connectionCount(senderID: principal) < engine.configuration.maxConnectionsPerSender
    }

    /// Registers the established session with the engine, once even if a client binds twice. Runs
    /// after the bind result is written: go-xmpp reads the very next element as that result.
    private func registerSession() {
        guard let link, let principal, context != nil, !registered else { return }
        switch role {
        case .appServer:
            let info = AppServerConnectionInfo(id: link.id, senderID: principal, remoteAddress: remoteAddress,
                                               connectedAtMillis: engine.clock.nowMillis(),
                                               resource: negotiation.boundJID)
            guard engine.connectionOpened(info, link: link) else {
                perform(negotiation.streamError("resource-constraint", text: "too many connections for sender \(principal)"))
                return
            }
            engine.report(appServer: .connectionOpened(connection: link.id, sender: principal))
        case .device:
            flushOutput()
            engine.deviceConnected(token: principal, link: link)
        }
        registered = true
    }

    /// Tells the engine the session is over, as soon as we know it (not when TLS has finished closing).
    func unregisterSession() {
        guard registered, let link, let principal else { return }
        registered = false
        switch role {
        case .appServer:
            engine.connectionClosed(id: link.id)
            engine.report(appServer: .connectionClosed(connection: link.id))
        case .device: engine.deviceDisconnected(token: principal, link: link)
        }
    }

    // MARK: output

    /// Appends to the pending output. Everything written between two flushes goes to the TLS layer
    /// as one buffer: one `SSL_write` and as few TLS records as the bytes need, instead of one record
    /// per stanza (a burst of ACKs to an app server is one record, not hundreds).
    func write(_ text: String) {
        guard context != nil, !closing else { return }
        withOutput { $0.writeString(text) }
    }

    @inline(__always)
    func withOutput(_ body: (inout ByteBuffer) -> Void) {
        if output == nil, let context { output = context.channel.allocator.buffer(capacity: 512) }
        if output != nil { body(&output!) }
    }

    /// Hands the pending output to the pipeline and flushes it.
    func flushOutput() {
        guard let context else { return }
        if let pending = output {
            output = nil
            context.write(wrapOutboundOut(pending), promise: nil)
        }
        context.flush()
        // Output the peer does not read stays in memory: past the cap the connection goes
        // (docs/hardening.md). Reads stop earlier, at the high-water mark (`read(context:)`).
        if !context.channel.isWritable, !closing,
           let buffered = try? context.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes),
           buffered > configuration.maxBufferedOutput {
            Self.closedForUnreadOutput.add(1, ordering: .relaxed)
            logger.warning("closing a connection whose peer does not read", metadata: [
                "remote": "\(remoteAddress)", "buffered_bytes": "\(buffered)", "principal": "\(principal ?? "-")"])
            closing = true
            unregisterSession()
            context.close(promise: nil)
        }
    }

    // MARK: backpressure

    func read(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            context.read()
        } else {
            heldRead = true
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, heldRead {
            heldRead = false
            context.read()
        }
        context.fireChannelWritabilityChanged()
    }

    /// For writes that do not come from a read (engine completions): flushed once the mailbox's batch
    /// (or this event-loop turn) is done, together with everything else written meanwhile.
    func writeAndScheduleFlush(_ text: String) {
        guard context != nil, !closing else { return }
        write(text)
        mailbox.needsFlush(self)
    }

    /// Ends the stream the peer ended, now that its answers are written (or the grace period is over).
    func finishPeerEndedStream() {
        guard let timeout = peerEndTimeout, !closing else { return }
        timeout.cancel()
        peerEndTimeout = nil
        perform(negotiation.streamClosed())
    }

    func close() {
        guard let context, !closing else { return }
        closing = true
        unregisterSession()
        // Close once everything written before has gone out.
        let channel = context.channel
        let last = output ?? channel.allocator.buffer(capacity: 0)
        output = nil
        context.writeAndFlush(wrapOutboundOut(last)).whenComplete { _ in
            channel.close(promise: nil)
        }
        // That write never completes for a peer that never finished its TLS handshake (the auth
        // timeout of a half-open connection) or stopped reading: it is not waited for long.
        context.eventLoop.scheduleTask(in: configuration.closeGracePeriod) { channel.close(promise: nil) }
    }
}

/// The link's reference to its handler. Weak: the handler holds its link, and the engine (or a
/// completion still in flight) may hold a link after the connection is gone; a strong reference here
/// kept every closed connection's handler, parser and buffers alive for the life of the process.
final class WeakHandler {
    weak var handler: XMPPConnectionHandler?
    init(_ handler: XMPPConnectionHandler) { self.handler = handler }
}

/// The engine's handle on one connection; safe to use from any thread: it only hops to the
/// connection's event loop, and does nothing once the connection is gone.
final class ConnectionLink: AppServerLink, DeviceLink {
    let id: String
    let handler: NIOLoopBound<WeakHandler>
    let mailbox: LoopMailbox
    let pending = Atomic<Int>(0)
    let draining = Atomic<Bool>(false)
    /// A device's choice for this connection (`{"message_type":"views","enabled":…}`).
    let views = Atomic<Bool>(true)

    init(handler: NIOLoopBound<WeakHandler>, mailbox: LoopMailbox) {
        var g = SystemRandomNumberGenerator()
        self.id = String(g.next() as UInt64, radix: 16)
        self.handler = handler
        self.mailbox = mailbox
    }

    var pendingCount: Int { pending.load(ordering: .relaxed) }
    var isDraining: Bool { draining.load(ordering: .relaxed) }
    var wantsPlatformViews: Bool { views.load(ordering: .relaxed) }

    /// Runs `body` on the connection's loop if the connection still exists.
    func onHandler(_ body: @escaping @Sendable (XMPPConnectionHandler) -> Void) {
        let handler = self.handler
        mailbox.post {
            if let h = handler.value.handler { body(h) }
        }
    }

    func drain() { onHandler { $0.startDraining() } }
    func deliver(_ messages: [DeviceDelivery]) { onHandler { $0.deliverToDevice(messages) } }
    /// The device channel's answer to an upstream message the device sent (the engine's answer, or
    /// the role's own refusal), written as the JSON the device receives.
    func answerUpstream(_ outcome: UpstreamOutcome) {
        let json = DeviceUpstream.answer(outcome)
        onHandler { $0.writeGCM(json) }
    }
    func sendOutbound(_ messages: [OutboundMessage]) { onHandler { $0.sendToAppServer(messages) } }
    func close() { onHandler { $0.perform($0.negotiation.serverClosing()) } }
}
