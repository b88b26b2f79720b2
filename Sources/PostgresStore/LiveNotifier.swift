import CCSStore
import Dispatch
import Locking
import Logging
import PostgresNIO
import PushDomain

/// What nodes tell each other before anything is written (docs/scaling.md, "confirmed before
/// written"): messages offered to a device's node, and the device's confirmations back. They go as
/// PostgreSQL notifications, sent on a connection of their own, many lines to a notification and many
/// notifications to a statement: whatever was posted while the previous statement ran goes in the next.
///
/// Nothing here is durable or must arrive: a lost offer or confirmation only means the message is
/// written after its delay and reaches the device by the durable path. So the connection commits
/// without waiting for the disk (`synchronous_commit = off`: a NOTIFY still takes a transaction id).
final class LiveNotifier: Sendable {
    /// A notification's payload must be shorter than 8000 bytes (PostgreSQL's limit).
    static let payloadLimit = 7_900

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
            guard payload.hasPrefix("\n") else { return nil }
            var lines = payload.dropFirst().split(separator: "\n", omittingEmptySubsequences: true)
            guard let first = lines.first else { return nil }
            lines.removeFirst()
            if first == "C" { return (.confirmation, Array(lines)) }
            if first.hasPrefix("L ") { return (.offer(from: String(first.dropFirst(2))), Array(lines)) }
            return nil
        }
    }

    struct Item {
        var channel: String
        var header: Header
        var line: String
    }

    private let connection: BlockingConnection
    private let queue = DispatchQueue(label: "ccs-emulator.cluster.live")
    private let pending = Locked<(items: [Item], draining: Bool)>(([], false))
    private let logger: Logger

    init(store: PostgresStore, logger: Logger) {
        connection = BlockingConnection(url: store.url, eventLoop: store.group.next(),
                                        setup: ["SET synchronous_commit = off"], logger: logger)
        self.logger = logger
    }

    /// Queues one line for `channel`; it goes out with whatever else is waiting.
    func post(_ line: String, header: Header, channel: String) {
        let start = pending.withLock { p -> Bool in
            p.items.append(Item(channel: channel, header: header, line: line))
            if p.draining { return false }
            p.draining = true
            return true
        }
        if start { queue.async { self.drain() } }
    }

    func close() {
        queue.sync { connection.close() }
    }

    private func drain() {
        while true {
            let items = pending.withLock { p -> [Item] in
                let taken = p.items
                p.items = []
                if taken.isEmpty { p.draining = false }
                return taken
            }
            if items.isEmpty { return }
            let (channels, payloads) = Self.pack(items)
            do {
                try connection.withSession { s in
                    _ = try s.rows("SELECT count(pg_notify(c, p)) FROM unnest($1::text[], $2::text[]) AS t(c, p)",
                                   binds(channels, payloads))
                }
            } catch {
                // The messages offered are written after their delay; the confirmations' messages are
                // then removed by the device's node when the write is announced to it.
                logger.warning("telling another node failed", metadata: ["error": "\(error)", "notifications": "\(payloads.count)"])
            }
        }
    }

    /// The lines as few payloads as fit: one header per payload, lines kept in their order per channel.
    static func pack(_ items: [Item]) -> ([String], [String]) {
        var open: [Key: Int] = [:]  // the payload being filled for each channel and header
        var channels: [String] = []
        var payloads: [String] = []
        for item in items where fits(item.line, header: item.header) {
            let key = Key(channel: item.channel, header: item.header)
            if let i = open[key], payloads[i].utf8.count + 1 + item.line.utf8.count <= payloadLimit {
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
        header.text.utf8.count + 1 + line.utf8.count <= payloadLimit
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
