import StoreModel
import Locking
import Logging
import NIOCore
import PostgresNIO
import PushDomain

/// What nodes tell each other before anything is written (docs/scaling.md, "confirmed before
/// written"): messages offered to a device's node, and the device's confirmations back. They go as
/// PostgreSQL notifications, sent on a connection of their own, many lines to a notification and many
/// notifications to a statement: whatever was posted while the previous statement ran goes in the next.
///
/// Each payload goes sealed with the cluster's key (`NotifySeal`): any role that may connect could
/// LISTEN, or NOTIFY a forged confirmation that calls a write off (issue 39).
///
/// Nothing here is durable or must arrive: a lost offer or confirmation only means the message is
/// written after its delay and reaches the device by the durable path. So the connection commits
/// without waiting for the disk (`synchronous_commit = off`: a NOTIFY still takes a transaction id).
final class LiveNotifier: Sendable {
    /// A notification's payload must be shorter than 8000 bytes (PostgreSQL's limit).
    static let payloadLimit = 7_900
    /// What a payload may hold before it is sealed: sealed, it is still under `payloadLimit`.
    static let plainLimit = NotifySeal.plainLimit

    /// The first line of a payload on a node's channel, which no token and no JSON object starts with.
    enum Header: Sendable, Hashable {
        /// Messages offered by `node`, one announcement-format JSON object per line.
        case offer(from: String)
        /// Device message ids whose devices confirmed them, one per line.
        case confirmation

        var text: String {
            switch self {
            case .offer(let node): "\nL \(node)"
            case .confirmation: "\nC"
            }
        }

        /// The header and the lines of a payload, if it is one of these.
        static func parse(_ payload: String) -> (Header, [Substring])? {
            // Split by bytes: splitting by `Character` (grapheme breaking) cost a tenth of a node's time.
            let newline = UInt8(ascii: "\n")
            guard payload.utf8.first == newline else { return nil }
            var lines = payload.utf8.dropFirst().split(separator: newline).map { Substring($0) }
            guard !lines.isEmpty else { return nil }
            let first = lines.removeFirst()
            if first == "C" { return (.confirmation, lines) }
            if first.hasPrefix("L ") { return (.offer(from: String(first.dropFirst(2))), lines) }
            return nil
        }
    }

    /// A payload read as what a link carries (`LinkFrames`), if it is an offer or a confirmation.
    static func decode(_ payload: String) -> LinkFrames.Decoded? {
        guard let (header, lines) = Header.parse(payload) else { return nil }
        switch header {
        case .offer(let node):
            return .offers(from: node, lines.compactMap { PostgresCluster.message(fromAnnouncement: String($0)) })
        case .confirmation:
            return .confirmations(lines.map(String.init))
        }
    }

    struct Item: Sendable {
        var channel: String
        var header: Header
        var line: String
    }

    /// The connection, opened on first use and again after it closed; statements are sent from its
    /// event loop's callbacks, so no thread waits for PostgreSQL and none is woken to send.
    private let url: PostgresURL
    private let eventLoop: any EventLoop
    private let waiting = DrainQueue<Item>()
    private let connection = Locked<PostgresConnection?>(nil)
    private let logger: Logger
    private let seal: NotifySeal

    init(store: PostgresStore, seal: NotifySeal, logger: Logger) {
        self.seal = seal
        url = store.url
        eventLoop = store.group.next()
        self.logger = logger
    }

    /// Queues one line for `channel`; it goes out with whatever else is waiting.
    func post(_ line: String, header: Header, channel: String) {
        if waiting.add(Item(channel: channel, header: header, line: line)) { sendWaiting() }
    }

    func close() {
        let open = connection.withLock { c -> PostgresConnection? in
            defer { c = nil }
            return c
        }
        _ = try? open?.close().wait()
    }

    /// Sends what waits as one statement, and when it is answered, what came meanwhile.
    private func sendWaiting() {
        let items = waiting.take()
        if items.isEmpty { return }
        let (channels, plain) = Self.pack(items)
        let payloads = zip(channels, plain).map { seal.seal($1, channel: $0) }
        connected().flatMap { connection in
            connection.query(PostgresQuery(unsafeSQL: "SELECT count(pg_notify(c, p)) FROM unnest($1::text[], $2::text[]) AS t(c, p)",
                                           binds: binds(channels, payloads)), logger: self.logger)
        }.whenComplete { result in
            if case .failure(let error) = result {
                // The messages offered are written after their delay; the confirmations' messages are
                // then removed by the device's node when the write is announced to it.
                self.logger.warning("telling another node failed", metadata: ["error": "\(error)", "notifications": "\(payloads.count)"])
            }
            self.sendWaiting()
        }
    }

    private func connected() -> EventLoopFuture<PostgresConnection> {
        if let open = connection.withLock({ $0 }), !open.isClosed { return eventLoop.makeSucceededFuture(open) }
        let configuration: PostgresConnection.Configuration
        do { configuration = try url.configuration() } catch { return eventLoop.makeFailedFuture(error) }
        return PostgresConnection.connect(on: eventLoop, configuration: configuration, id: 2_000_000, logger: logger)
            .flatMap { connection in
                connection.query("SET synchronous_commit = off", logger: self.logger).map { _ in connection }
                    .flatMapErrorThrowing { error in
                        let closing: EventLoopFuture<Void> = connection.close()
                        _ = closing
                        throw error
                    }
            }
            .map { connection in
                self.connection.withLock { $0 = connection }
                return connection
            }
    }

    /// The lines as few payloads as fit: one header per payload, lines kept in their order per channel.
    static func pack(_ items: [Item]) -> ([String], [String]) {
        var open: [Key: Int] = [:]  // the payload being filled for each channel and header
        var channels: [String] = []
        var payloads: [String] = []
        for item in items where fits(item.line, header: item.header) {
            let key = Key(channel: item.channel, header: item.header)
            if let i = open[key], payloads[i].utf8.count + 1 + item.line.utf8.count <= plainLimit {
                payloads[i] += "\n"
                payloads[i] += item.line
                continue
            }
            open[key] = payloads.count
            channels.append(item.channel)
            payloads.append(item.header.text + "\n" + item.line)
        }
        return (channels, payloads)
    }

    /// Whether a line fits a payload on its own (a message that does not is not offered).
    static func fits(_ line: String, header: Header) -> Bool {
        header.text.utf8.count + 1 + line.utf8.count <= plainLimit
    }

    private struct Key: Hashable {
        var channel: String
        var header: Header
    }

    /// A message as an offer's line: the same object `ccs_enqueue` announces, so that one reader
    /// (`PostgresCluster.message(fromAnnouncement:)`) takes both.
    static func line(_ m: QueuedMessage) -> String {
        var w = JSONObjectWriter(capacity: 256 + m.payload.utf8.count * 5 / 4)
        w.add("token", m.token)
        w.add("id", m.deviceMessageID)
        w.add("sender", m.senderID)
        w.add("app_id", m.appMessageID)
        if let key = m.collapseKey { w.add("key", key) }
        w.add("priority", m.priority)
        w.add("ttl", m.timeToLive)
        w.add("enqueued", m.enqueuedAt)
        w.add("expires", m.expiresAt)
        w.add("receipt", m.deliveryReceiptRequested ? 1 : 0)
        w.add("dwi", m.delayWhileIdle ? 1 : 0)
        w.add("notification", m.isNotification ? 1 : 0)
        w.add("kind", m.kind.rawValue)
        w.add("payload", m.payload)
        if let blocks = m.platformBlocks { w.add("blocks", blocks) }
        return w.finished()
    }
}
