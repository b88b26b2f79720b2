import NIOCore
import NIOSSL
import Synchronization

/// How a connection logs in.
public struct XMPPLogin: Sendable {
    public enum TLSMode: String, Sendable, CaseIterable {
        /// TLS from the first byte (CCS, the device channel, XMPP's port 5223 convention).
        case direct
        /// Plain TCP, then `<starttls/>` (RFC 6120 §5).
        case starttls
    }

    /// The `to` of the stream header.
    public var domain: String
    /// The SASL PLAIN authentication identity.
    public var user: String
    public var password: String
    /// nil: the server picks one.
    public var resource: String?
    public var tls: TLSMode
    /// For STARTTLS: the context to start TLS with once the server says `<proceed/>`.
    public var startTLSContext: NIOSSLContext?
    /// Send `<presence/>` once bound (standard XMPP servers route chat only to available resources).
    public var sendPresence: Bool

    public init(domain: String, user: String, password: String, resource: String? = nil, tls: TLSMode = .direct,
                startTLSContext: NIOSSLContext? = nil, sendPresence: Bool = false) {
        self.domain = domain
        self.user = user
        self.password = password
        self.resource = resource
        self.tls = tls
        self.startTLSContext = startTLSContext
        self.sendPresence = sendPresence
    }
}

/// Start and stop for every sender of a run, shared by all connections.
public final class RunControl: Sendable {
    /// Monotonic start of the measured phase; 0 while not started.
    let startNanos = Atomic<UInt64>(0)
    let stopSending = Atomic<Bool>(false)

    public init() {}

    public func start(at nanos: UInt64 = MonotonicClock.nanos()) { startNanos.store(nanos, ordering: .releasing) }
    public func stop() { stopSending.store(true, ordering: .releasing) }
    var started: UInt64 { startNanos.load(ordering: .acquiring) }
    var stopped: Bool { stopSending.load(ordering: .relaxed) }
}

public struct LoginFailed: Error, CustomStringConvertible {
    public var description: String
}

/// Fired into the pipeline when a login takes too long.
struct LoginTimedOut {}

/// An XMPP client connection of the generator: login (stream, optional STARTTLS, SASL PLAIN, restart,
/// bind, optional session and presence), then whatever the subclass does with the traffic.
///
/// Bytes are framed by `StanzaFramer` and inspected in place; outgoing stanzas go into one buffer per
/// event-loop turn, flushed once. Lives on its channel's event loop only.
class BenchConnection: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum Phase { case opening, startingTLS, authenticating, binding, session, ready, closed }

    let login: XMPPLogin
    let recorder: LoopRecorder
    let established: EventLoopPromise<Void>
    // Small to start with (10,000 idle connections hold one each); both grow to the largest burst once.
    var framer = StanzaFramer(capacity: 1024)
    var phase = Phase.opening
    var context: ChannelHandlerContext?
    var out: ByteBuffer
    var failure: String?
    /// `established` has been completed (it must be, exactly once).
    var settled = false
    /// Sends traffic (ticked by the loop) when set; receives only when nil.
    var sender: Sender?
    /// The padding every message sent carries.
    let payload: [UInt8]

    init(login: XMPPLogin, recorder: LoopRecorder, established: EventLoopPromise<Void>, sender: Sender? = nil,
         payloadBytes: Int = 0) {
        self.login = login
        self.recorder = recorder
        self.established = established
        self.out = ByteBufferAllocator().buffer(capacity: 0)
        self.sender = sender
        self.payload = Array(repeating: UInt8(ascii: "x"), count: payloadBytes)
    }

    // MARK: hooks for subclasses

    /// The session is established.
    func ready(context: ChannelHandlerContext) {}
    /// A stanza after login: a `<message>` goes to `message(_:now:)`; anything else is answered if
    /// it is a ping.
    func stanza(_ bytes: UnsafeRawBufferPointer, context: ChannelHandlerContext) {
        guard ByteScan.nameIs(bytes, "message") else {
            _ = answerPing(bytes)
            return
        }
        message(bytes, now: MonotonicClock.nanos())
    }
    /// A `<message>` after login, received at `now`.
    func message(_ s: UnsafeRawBufferPointer, now: UInt64) {}
    /// Called by the loop's ticker while the session is established, if `wantsTicks`.
    func tick(now: UInt64) {
        pump(now: now)
        flush()
    }
    /// Writes what the sender may send now (its window and plan permit); flushed by the caller.
    func pump(now: UInt64) {}
    var wantsTicks: Bool { sender != nil }
    func closed() {}

    // MARK: channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        out = context.channel.allocator.buffer(capacity: 1024)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        openStream()
        flush()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !settled {
            settled = true
            established.fail(LoginFailed(description: failure ?? "the server closed the connection during login"))
        }
        phase = .closed
        closed()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is LoginTimedOut, phase != .ready {
            fail("login timed out (phase \(phase))")
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if failure == nil { failure = "\(error)" }
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        framer.append(&bytes)
        do {
            while phase != .closed, let event = try framer.next() {
                switch event {
                case .streamOpen:
                    break
                case .streamClose:
                    fail("the server closed the stream")
                case .stanza(let range):
                    if phase == .ready {
                        framer.withBytes(range) { stanza($0, context: context) }
                    } else {
                        framer.withBytes(range) { negotiate($0) }
                    }
                }
            }
        } catch {
            fail("malformed XML from the server")
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flush()
        context.fireChannelReadComplete()
    }

    // MARK: output

    @inline(__always)
    func flush() {
        guard out.readableBytes > 0, let context else { return }
        context.writeAndFlush(wrapOutboundOut(out), promise: nil)
        // Once TLS has encrypted the bytes (during the flush) nothing else holds the storage, and
        // clearing reuses it: no allocation. If something still does, clear() starts a new one.
        out.clear()
    }

    func send(_ text: String) {
        out.writeString(text)
    }

    func fail(_ reason: String) {
        if failure == nil { failure = reason }
        context?.close(promise: nil)
    }

    // MARK: login

    private func openStream() {
        framer.restart()
        send(StanzaWriter.streamHeader(to: login.domain))
    }

    private func negotiate(_ s: UnsafeRawBufferPointer) {
        if ByteScan.nameIs(s, "error") {
            let end = ByteScan.startTagEnd(s)
            let inner = s.count > end + 1 ? String(decoding: s[(end + 1)...].prefix(200), as: UTF8.self) : ""
            fail("stream error during login: \(inner)")
            return
        }
        switch phase {
        case .opening:
            guard ByteScan.nameIs(s, "features") else { return }
            if login.tls == .starttls && !tlsStarted {
                guard ByteScan.find("urn:ietf:params:xml:ns:xmpp-tls", in: s, from: 0) != nil else {
                    fail("the server does not offer STARTTLS")
                    return
                }
                send(StanzaWriter.startTLS)
                phase = .startingTLS
                flush()
                return
            }
            guard ByteScan.find(">PLAIN<", in: s, from: 0) != nil else {
                fail("the server does not offer SASL PLAIN")
                return
            }
            send(StanzaWriter.saslPlain(user: login.user, password: login.password))
            phase = .authenticating
            flush()
        case .startingTLS:
            guard ByteScan.nameIs(s, "proceed"), let context, let tls = login.startTLSContext else {
                fail("STARTTLS refused")
                return
            }
            do {
                let handler = try NIOSSLClientHandler(context: tls, serverHostname: nil)
                try context.pipeline.syncOperations.addHandler(handler, position: .first)
            } catch {
                fail("could not start TLS: \(error)")
                return
            }
            // After STARTTLS the stream starts over, as if newly connected.
            tlsStarted = true
            phase = .opening
            openStream()
            flush()
        case .authenticating:
            if ByteScan.nameIs(s, "success") {
                phase = .binding
                openStream()
                flush()
            } else if ByteScan.nameIs(s, "failure") {
                fail("authentication failed for \(login.user)")
            }
        case .binding:
            if ByteScan.nameIs(s, "features") {
                sessionAdvertised = ByteScan.find("urn:ietf:params:xml:ns:xmpp-session", in: s, from: 0) != nil
                    && ByteScan.find("<optional", in: s, from: 0) == nil
                send(StanzaWriter.bind(resource: login.resource))
                flush()
            } else if ByteScan.nameIs(s, "iq") {
                guard let t = ByteScan.attribute("type=", in: s), ByteScan.equals(s, t, "result") else {
                    fail("resource binding failed")
                    return
                }
                if sessionAdvertised {
                    phase = .session
                    send(StanzaWriter.session)
                    flush()
                } else {
                    becomeReady()
                }
            }
        case .session:
            if ByteScan.nameIs(s, "iq") { becomeReady() }
        case .ready, .closed:
            break
        }
    }

    private var tlsStarted = false
    private var sessionAdvertised = false

    func becomeReady() {
        guard let context else { return }
        if login.sendPresence { send("<presence/>") }
        phase = .ready
        recorder.attach(self)
        settled = true
        established.succeed(())
        ready(context: context)
        flush()
    }

    /// Answers a server's ping; true if the stanza was one.
    func answerPing(_ s: UnsafeRawBufferPointer) -> Bool {
        guard ByteScan.nameIs(s, "iq"), ByteScan.find("urn:xmpp:ping", in: s, from: 0) != nil,
              let id = ByteScan.attribute("id=", in: s) else { return false }
        out.writeStaticString("<iq type=\"result\" id=\"")
        out.writeBytes(UnsafeRawBufferPointer(rebasing: s[id]))
        out.writeStaticString("\"/>")
        return true
    }

    /// Closes the stream politely.
    func closeStream() {
        guard let context, phase != .closed else { return }
        send("</stream:stream>")
        flush()
        context.close(promise: nil)
    }
}
