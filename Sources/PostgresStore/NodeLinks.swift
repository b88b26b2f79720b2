import Dispatch
import Locking
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import StoreModel

/// Direct TCP links between the nodes, over TLS keyed by the listener's secret (`NodeLinkTLS`), for what they tell each other before anything is written
/// (docs/scaling.md, "confirmed before written"): offers and confirmations, as the binary frames
/// of `LinkFrames`. Through PostgreSQL each batch cost a transaction, a
/// notification queue entry and a wake-up of every listening backend (about 130 µs of PostgreSQL's CPU
/// per message at 6,000/s); over a link it is a write on a socket.
///
/// Each node listens on one port and publishes its address and a secret of its own in its
/// `cluster_node` row; a node that wants to tell another connects to that address and sends the
/// secret first (whoever can read the database may connect). A link that is not up yet, or is
/// lost, leaves its lines to the caller's fallback; nothing on a link must arrive (the write follows
/// its delay), so nothing is resent.
final class NodeLinks: Sendable {
    /// How a node is reached: its address and the secret its listener expects.
    struct Endpoint: Sendable, Equatable {
        var host: String
        var port: Int
        var secret: String
    }

    static let hello = "ccs-emulator-link 1 "
    /// Frames larger than this are refused (a frame holds what waited for one event-loop turn).
    static let maxFrameBytes = 16 << 20
    /// Links to this node that have not shown its secret yet, at most (`LinkAdmission`).
    static let maxUnauthenticated = 64
    /// A link holding this much unwritten (its peer reads too slowly) takes nothing more until it is
    /// down to the low mark: what is posted meanwhile goes through NOTIFY (issue 39).
    static let writeBufferWaterMark = ChannelOptions.Types.WriteBufferWaterMark(low: 1 << 20, high: 4 << 20)

    let secret: String
    /// This node's id, which its offers carry.
    private let nodeID: String
    /// The node's own event loops: a link is read and written where its connections' are, so an offer
    /// reaches a device, and a confirmation leaves, without a hop to another thread.
    private let group: any EventLoopGroup
    private let logger: Logger
    private let server = Locked<(any Channel)?>(nil)
    private let links = Locked<[String: Link]>([:])
    /// Finds another node's endpoint (a read of the database, off the event loops); nil: not live.
    private let resolve: @Sendable (String) -> Endpoint?
    private let resolving = DispatchQueue(label: "ccs-emulator.cluster.links")
    private let receiver = Locked(WeakReceiver())
    private let listening = Locked<Int?>(nil)
    /// How long a link to this node may take to finish TLS and show the secret (the deadline of the
    /// node's other TLS listeners, `--request-timeout`).
    private let handshakeTimeout: TimeAmount
    private let admission: LinkAdmission

    private struct WeakReceiver {
        weak var value: (any NodeLinkReceiver)?
    }

    /// Who takes each frame that arrives (on the link's event loop); frames before it is set are dropped.
    func setReceiver(_ receiver: any NodeLinkReceiver) {
        self.receiver.withLock { $0.value = receiver }
    }

    /// The port the listener is bound to.
    var port: Int? { listening.withLock { $0 } }

    init(group: any EventLoopGroup, nodeID: String, logger: Logger, handshakeTimeout: TimeAmount = .seconds(30),
         maxUnauthenticated: Int = NodeLinks.maxUnauthenticated, resolve: @escaping @Sendable (String) -> Endpoint?) {
        self.nodeID = nodeID
        self.handshakeTimeout = handshakeTimeout
        admission = LinkAdmission(limit: maxUnauthenticated)
        var bytes = SystemRandomNumberGenerator()
        secret = (0..<4).map { _ in String(bytes.next() as UInt64, radix: 16) }.joined()
        self.group = group
        self.logger = logger
        self.resolve = resolve
    }

    /// Listens on `host:port` (0: a free port); returns the port.
    func listen(host: String, port: Int) throws -> Int {
        let secret = self.secret
        let tls = try NodeLinkTLS.listenerContext(secret: secret)
        let received: @Sendable (LinkFrames.Decoded) -> Void = { [weak self] frame in
            self?.receiver.withLock { $0.value }?.linkReceived(frame)
        }
        let (logger, admission, timeout) = (self.logger, self.admission, handshakeTimeout)
        let channel = try ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                // Past the cap of links that have not shown the secret, a new one is closed at once.
                guard admission.admit() else {
                    logger.warning("a link was refused: too many links have not shown this node's secret yet",
                                   metadata: ["limit": "\(admission.limit)"])
                    return channel.eventLoop.makeFailedFuture(LinkRefused())
                }
                // The handler releases its place in the cap; until it is in the pipeline, a failure here does.
                let handler = IncomingLinkHandler(secret: secret, timeout: timeout, admission: admission, received: received,
                                                  logger: logger)
                return channel.eventLoop.makeCompletedFuture {
                    do {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LinkFrameDecoder()))
                        try channel.pipeline.syncOperations.addHandler(handler)
                    } catch {
                        handler.settle()
                        throw error
                    }
                }
            }
            .bind(host: host, port: port).wait()
        server.withLock { $0 = channel }
        let bound = channel.localAddress?.port ?? port
        listening.withLock { $0 = bound }
        return bound
    }

    /// Closes the listener and every link, without waiting.
    func close() {
        let (listening, open) = (server.withLock { s -> (any Channel)? in defer { s = nil }; return s },
                                 links.withLock { l -> [Link] in defer { l = [:] }; return Array(l.values) })
        listening?.close(promise: nil)
        for link in open { link.close() }
    }

    /// Sends a message to `node` with whatever else waits for it; false if there is no link up to it
    /// (one is being made: the caller sends it its other way).
    func offer(_ message: QueuedMessage, to node: String) -> Bool { post(.offer(message), to: node) }

    /// Sends a confirmation to `node`, as `offer` does.
    func confirm(_ deviceMessageID: String, to node: String) -> Bool { post(.confirmation(deviceMessageID), to: node) }

    private func post(_ item: Link.Item, to node: String) -> Bool {
        let link = links.withLock { l -> Link in
            if let existing = l[node] { return existing }
            let made = Link(node: node, origin: nodeID, eventLoop: group.next(), logger: logger)
            l[node] = made
            return made
        }
        switch link.post(item) {
        case .sent: return true
        case .connectFirst:
            resolving.async { [self] in connect(link) }
            return false
        case .down: return false
        }
    }

    private func connect(_ link: Link) {
        guard let endpoint = resolve(link.node) else {
            link.failed()
            return
        }
        let hello = Self.hello + endpoint.secret
        let tls: NIOSSLContext
        do {
            tls = try NodeLinkTLS.linkContext(secret: endpoint.secret)
        } catch {
            logger.warning("linking to another node failed; its messages go through PostgreSQL",
                           metadata: ["node": "\(link.node)", "error": "\(error)"])
            link.failed()
            return
        }
        let forget: @Sendable () -> Void = { [weak self] in
            _ = self?.links.withLock { l in if l[link.node] === link { l[link.node] = nil } }
        }
        ClientBootstrap(group: link.eventLoop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelOption(.writeBufferWaterMark, value: Self.writeBufferWaterMark)
            .connectTimeout(.seconds(2))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: nil))
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    channel.closeFuture.whenComplete { _ in forget() }
                    link.connected(channel, hello: hello)
                case .failure(let error):
                    self.logger.warning("linking to another node failed; its messages go through PostgreSQL",
                                        metadata: ["node": "\(link.node)", "error": "\(error)"])
                    link.failed()
                    // Tried again after a while (a node that restarts publishes a new address).
                    link.eventLoop.scheduleTask(in: .seconds(2)) { forget() }
                }
            }
    }

    /// One outgoing link: lines wait here until the link's event loop writes them, all at once.
    final class Link: Sendable {
        enum Posted { case sent, connectFirst, down }
        enum Item {
            case offer(QueuedMessage)
            case confirmation(String)
        }
        private enum Phase { case new, connecting, up(any Channel), down }
        private struct Waiting {
            var offers: [QueuedMessage] = []
            var confirmations: [String] = []
            var isEmpty: Bool { offers.isEmpty && confirmations.isEmpty }
        }

        let node: String
        /// The id of the node that sends on this link (its offers carry it).
        let origin: String
        let eventLoop: any EventLoop
        private let logger: Logger
        private let state = Locked<(phase: Phase, waiting: Waiting, scheduled: Bool)>((.new, Waiting(), false))

        init(node: String, origin: String, eventLoop: any EventLoop, logger: Logger) {
            self.node = node
            self.origin = origin
            self.eventLoop = eventLoop
            self.logger = logger
        }

        func post(_ item: Item) -> Posted {
            let (posted, schedule) = state.withLock { s -> (Posted, Bool) in
                switch s.phase {
                case .new:
                    s.phase = .connecting
                    return (.connectFirst, false)
                case .connecting, .down:
                    return (.down, false)
                case .up(let channel):
                    // Past the high-water mark: the caller sends it through NOTIFY (no buffer without end).
                    guard channel.isWritable else { return (.down, false) }
                    switch item {
                    case .offer(let m): s.waiting.offers.append(m)
                    case .confirmation(let id): s.waiting.confirmations.append(id)
                    }
                    if s.scheduled { return (.sent, false) }
                    s.scheduled = true
                    return (.sent, true)
                }
            }
            if schedule { eventLoop.execute { self.flush() } }
            return posted
        }

        func connected(_ channel: any Channel, hello: String) {
            channel.writeAndFlush(LinkFrames.frame(hello, allocator: channel.allocator), promise: nil)
            state.withLock { $0.phase = .up(channel) }
        }

        func failed() { state.withLock { $0.phase = .down } }

        func close() {
            let channel = state.withLock { s -> (any Channel)? in
                defer { s.phase = .down }
                if case .up(let c) = s.phase { return c }
                return nil
            }
            channel?.close(promise: nil)
        }

        /// On the event loop: everything posted since the last turn, as one frame of each kind.
        private func flush() {
            let (waiting, channel) = state.withLock { s -> (Waiting, (any Channel)?) in
                defer { s.waiting = Waiting(); s.scheduled = false }
                if case .up(let c) = s.phase { return (s.waiting, c) }
                return (Waiting(), nil)
            }
            guard let channel, !waiting.isEmpty else { return }
            var buffer = channel.allocator.buffer(capacity: 64 + waiting.offers.count * 512 + waiting.confirmations.count * 48)
            if !waiting.offers.isEmpty { LinkFrames.writeOffers(waiting.offers, from: origin, to: &buffer) }
            if !waiting.confirmations.isEmpty { LinkFrames.writeConfirmations(waiting.confirmations, to: &buffer) }
            channel.writeAndFlush(buffer, promise: nil)
        }
    }
}

/// Takes what other nodes send over their links.
protocol NodeLinkReceiver: AnyObject, Sendable {
    func linkReceived(_ frame: LinkFrames.Decoded)
}

/// A link's frames: a 4-byte big-endian length, then that many bytes of UTF-8 text. A length over
/// `NodeLinks.maxFrameBytes` closes the link before anything is buffered for it.
struct LinkFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    struct FrameTooLarge: Error {}

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else { return .needMoreData }
        guard length <= NodeLinks.maxFrameBytes else { throw FrameTooLarge() }
        guard buffer.readableBytes >= 4 + Int(length) else { return .needMoreData }
        buffer.moveReaderIndex(forwardBy: 4)
        context.fireChannelRead(wrapInboundOut(buffer.readSlice(length: Int(length))!))
        return .continue
    }
}

/// A link refused before anything is read from it (`LinkAdmission`).
struct LinkRefused: Error {}

/// A link another node opened to this one: its first frame is the hello with this node's secret;
/// then each frame is one of `LinkFrames`. One that has not shown the secret by the handshake
/// deadline is closed (a connection that never speaks is not kept: issue 39); until it shows it, it
/// counts against the listener's cap (`LinkAdmission`).
private final class IncomingLinkHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer

    private let secret: String
    private let timeout: TimeAmount
    private let admission: LinkAdmission
    private let received: @Sendable (LinkFrames.Decoded) -> Void
    private let logger: Logger
    /// Whether the hello came, and the deadline until it did (cancelled then, or when the link closes).
    private let state = Locked<(greeted: Bool, released: Bool, deadline: Scheduled<Void>?)>((false, false, nil))

    init(secret: String, timeout: TimeAmount, admission: LinkAdmission,
         received: @escaping @Sendable (LinkFrames.Decoded) -> Void, logger: Logger) {
        self.secret = secret
        self.timeout = timeout
        self.admission = admission
        self.received = received
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        let logger = self.logger
        let deadline = context.eventLoop.scheduleTask(in: timeout) {
            logger.warning("a link that did not show this node's secret in time was closed",
                           metadata: ["peer": "\(channel.remoteAddress.map { "\($0)" } ?? "-")"])
            channel.close(promise: nil)
        }
        state.withLock { $0.deadline = deadline }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        settle()
    }

    func channelInactive(context: ChannelHandlerContext) {
        settle()
        context.fireChannelInactive()
    }

    /// The deadline is off and the link no longer counts as unauthenticated (once).
    func settle() {
        let (deadline, release) = state.withLock { s -> (Scheduled<Void>?, Bool) in
            defer { s.deadline = nil; s.released = true }
            return (s.deadline, !s.released)
        }
        deadline?.cancel()
        if release { admission.release() }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var frame = unwrapInboundIn(data)
        if state.withLock({ $0.greeted }) {
            guard let decoded = LinkFrames.decode(frame) else {
                logger.warning("a link sent a frame that does not read; closed", metadata: ["peer": "\(context.remoteAddress.map { "\($0)" } ?? "-")"])
                context.close(promise: nil)
                return
            }
            received(decoded)
        } else if frame.readString(length: frame.readableBytes) == NodeLinks.hello + secret {
            state.withLock { $0.greeted = true }
            settle()
        } else {
            logger.warning("a link without this node's secret was closed", metadata: ["peer": "\(context.remoteAddress.map { "\($0)" } ?? "-")"])
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
