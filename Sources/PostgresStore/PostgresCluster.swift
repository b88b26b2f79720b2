import StoreModel
import Dispatch
import Locking
import Logging
import NIOCore
import PostgresNIO
import PushDomain

/// Several nodes on one PostgreSQL database acting as one service (docs/scaling.md), with
/// PostgreSQL's own LISTEN/NOTIFY between them:
///
/// - a lease per node (`cluster_node`), renewed every `renewEvery`; a node whose lease ran out is dead:
///   its devices' presence no longer counts and any node may take the items it held;
/// - the presence of each connected device (`device_presence`), written before the device's backlog
///   is read, under the device row's lock that every enqueue takes too: a message committed on
///   another node either is in that read or is announced to this node (`ccs_node_<id>`);
/// - upstream messages and receipts owned by one node at a time (`outbound.owner`), taken with one
///   `UPDATE … RETURNING` so that two nodes never send the same item;
/// - registry changes (devices, senders, subscriptions, groups) announced on `ccs_registry` by the
///   writing transaction itself, and read again by every other node;
/// - each device's node announced on `ccs_presence` (kept in memory on every node), so that a message
///   for a device on another node is offered to that node at once, before it is written; the device's
///   confirmation comes back and calls the write off. Both go over direct links between the nodes
///   (`NodeLinks`), or through NOTIFY while a link is not up (`LiveNotifier`).
///
/// Every announcement only shortens a wait: the sweep (presence-holding devices with queued
/// messages, items no live node holds) catches up on any that was lost.
public final class PostgresCluster: ClusterCoordinator, NodeLinkReceiver {
    static let registryChannel = "ccs_registry"
    static let outboundChannel = "ccs_outbound"
    static let nodeChannelPrefix = "ccs_node_"
    static let presenceChannel = "ccs_presence"

    public var nodeID: String { store.nodeID }
    /// The slot of device message ids this node holds (`MessageIDSlot`), chosen at start.
    public let messageIDSlot: Int
    private let store: PostgresStore
    /// Seals what this node sends through NOTIFY, and opens what it takes (`NotifySeal`).
    let seal: NotifySeal
    /// Notifications refused as not the cluster's (logged now and then, not each: they may be a flood).
    private let refused = Locked(0)
    private let connection: BlockingConnection
    private let logger: Logger
    /// Every write and every event handled here, in order, off the event loops.
    private let queue = DispatchQueue(label: "ccs-emulator.cluster")
    /// Messages announced for this node's devices: a queue of their own, so that a hand-over never
    /// waits behind the lease renewal, a claim or a sweep (each a round trip to PostgreSQL).
    private let announcements = DispatchQueue(label: "ccs-emulator.cluster.announcements")
    private let listener = Locked<PostgresConnection?>(nil)
    /// Devices connected or gone here whose presence is not recorded yet, and whether a round is under way.
    private let presenceChanges = DrainQueue<PresenceChange>()
    /// Token → the other node it is connected to, as announced on `ccs_presence`.
    private let presence = Locked<[String: String]>([:])
    private let live: LiveNotifier
    /// Direct links to the other nodes (nil: not open yet, everything goes through PostgreSQL).
    private let linked = Locked<NodeLinks?>(nil)
    private var links: NodeLinks? { linked.withLock { $0 } }
    private let events = Locked<WeakEvents?>(nil)
    /// Made here, started by `start`, cancelled by `stop` (a dispatch source is safe from any thread).
    nonisolated(unsafe) private let timer: any DispatchSourceTimer
    /// (started, stopped): libdispatch refuses to release a source that was never resumed.
    private let lifecycle = Locked((started: false, stopped: false))
    private let ticks = Locked(0)
    /// How long a lease lasts, and how often it is renewed (the sweep runs then too).
    let leaseMillis: Int64
    let renewEvery: DispatchTimeInterval

    private struct WeakEvents: Sendable {
        weak var value: (any ClusterEvents)?
    }

    public init(store: PostgresStore, leaseMillis: Int64 = 10_000, renewEveryMillis: Int = 2_000,
                logger: Logger = Logger(label: "ccs-emulator.cluster")) throws {
        self.store = store
        self.logger = logger
        self.leaseMillis = leaseMillis
        renewEvery = .milliseconds(renewEveryMillis)
        timer = DispatchSource.makeTimerSource(queue: queue)
        connection = BlockingConnection(url: store.url, eventLoop: store.group.next(), setup: [], logger: logger)
        let joined = try Self.join(connection, node: store.nodeID, leaseMillis: leaseMillis)
        messageIDSlot = joined.slot
        seal = NotifySeal(secret: joined.secret)
        live = LiveNotifier(store: store, seal: seal, logger: logger)
    }

    /// No slot of device message ids is free: as many nodes as there are slots are live.
    public struct NoFreeSlot: Error, CustomStringConvertible {
        public var description: String {
            "\(MessageIDSlot.count) nodes are live on this database already: no slot of message ids is free (docs/scaling.md)"
        }
    }

    /// Enters this node in `cluster_node` with the lowest slot no live node holds, under a lock that
    /// nodes starting together take in turn, and reads the cluster's secret (made by the first node).
    private static func join(_ connection: BlockingConnection, node: String, leaseMillis: Int64) throws -> (slot: Int, secret: String) {
        var random = SystemRandomNumberGenerator()
        let fresh = (0..<4).map { _ in String(random.next() as UInt64, radix: 16) }.joined()
        return try connection.transaction { s in
            try s.execute("SELECT pg_advisory_xact_lock(39, 4)")
            let free = try s.rows("""
                SELECT n FROM generate_series(0, $1 - 1) n WHERE n NOT IN (
                  SELECT id_slot FROM cluster_node WHERE lease_until > ccs_now_ms() AND id_slot IS NOT NULL)
                ORDER BY n LIMIT 1
                """, binds(Int64(MessageIDSlot.count))).first.map { try $0.makeRandomAccess()[0].decode(Int64.self) }
            guard let slot = free else { throw NoFreeSlot() }
            try s.execute("""
                INSERT INTO cluster_node(id, started_at, lease_until, id_slot) VALUES ($1, ccs_now_ms(), ccs_now_ms() + $2, $3)
                """, binds(node, leaseMillis, slot))
            try s.execute("INSERT INTO cluster_key(id, secret) VALUES (1, $1) ON CONFLICT (id) DO NOTHING", binds(fresh))
            let secret = try s.rows("SELECT secret FROM cluster_key WHERE id = 1").first
                .map { try $0.makeRandomAccess()[0].decode(String.self) } ?? fresh
            return (Int(slot), secret)
        }
    }

    /// Opens this node's links to the others (docs/scaling.md): listens on `bind:port` (0: a free
    /// port) on `group`, the node's own event loops, and publishes `advertised`, the port and the
    /// links' secret. Until then, and for a node that does not publish one, offers and confirmations
    /// go through PostgreSQL. `linkPort` is then the port bound. A link to this node that has not
    /// finished TLS and shown the secret within `handshakeTimeout` is closed.
    public func openLinks(group: any EventLoopGroup, bind: String, port: Int, advertised: String,
                          handshakeTimeout: TimeAmount = .seconds(30)) throws {
        let connection = self.connection
        let links = NodeLinks(group: group, nodeID: nodeID, logger: logger, handshakeTimeout: handshakeTimeout) { node in
            try? connection.withSession { s in
                try s.rows("""
                    SELECT link_host, link_port, link_secret FROM cluster_node
                    WHERE id = $1 AND lease_until > ccs_now_ms() AND link_host IS NOT NULL
                    """, binds(node)).first.map { row in
                    let (host, port, secret) = try row.decode((String, Int64, String).self)
                    return NodeLinks.Endpoint(host: host, port: Int(port), secret: secret)
                }
            }
        }
        links.setReceiver(self)
        let bound = try links.listen(host: bind, port: port)
        do {
            try connection.withSession { s in
                try s.execute("UPDATE cluster_node SET link_host = $2, link_port = $3, link_secret = $4 WHERE id = $1",
                              binds(nodeID, advertised, Int64(bound), links.secret))
            }
        } catch {
            links.close()
            throw error
        }
        linked.withLock { $0 = links }
    }

    /// The port this node's link listens on (nil: no links).
    public var linkPort: Int? { links?.port }

    var channel: String { Self.nodeChannelPrefix + nodeID }

    public func start(events: any ClusterEvents) {
        self.events.withLock { $0 = WeakEvents(value: events) }
        queue.sync { listen() }
        timer.schedule(deadline: .now() + renewEvery, repeating: renewEvery)
        timer.setEventHandler { [weak self] in self?.tick() }
        let resume = lifecycle.withLock { l -> Bool in
            guard !l.started && !l.stopped else { return false }
            l.started = true
            return true
        }
        if resume { timer.resume() }
    }

    deinit { cancelTimer() }

    private func cancelTimer() {
        let (resume, cancel) = lifecycle.withLock { l -> (Bool, Bool) in
            defer { l.stopped = true; l.started = true }
            return (!l.started, !l.stopped)
        }
        if resume { timer.resume() }
        if cancel { timer.cancel() }
    }

    public func stop() {
        guard !lifecycle.withLock({ $0.stopped }) else { return }
        cancelTimer()
        queue.sync {
            do {
                try connection.withSession { s in
                    try s.execute("UPDATE cluster_node SET lease_until = 0 WHERE id = $1", binds(nodeID))
                    try s.execute("DELETE FROM device_presence WHERE node = $1", binds(nodeID))
                    try s.execute("SELECT pg_notify('\(Self.presenceChannel)', $1)",
                                  binds(seal.seal("* -" + nodeID, channel: Self.presenceChannel)))
                }
            } catch {
                logger.warning("leaving the cluster: \(error)")
            }
            listener.withLock { slot in
                if let open = slot { _ = try? open.close().wait() }
                slot = nil
            }
            connection.close()
        }
        live.close()
        links?.close()
    }

    // MARK: what the engine tells

    public func deviceOnline(token: String, then: @escaping @Sendable () -> Void) {
        record(.online(token: token, then: then))
    }

    public func deviceOffline(token: String) {
        record(.offline(token: token))
    }

    /// A device's connection here, opened or closed, waiting to be recorded.
    private enum PresenceChange {
        case online(token: String, then: @Sendable () -> Void)
        case offline(token: String)
    }

    private func record(_ change: PresenceChange) {
        if presenceChanges.add(change) { queue.async { [self] in recordPresence() } }
    }

    /// Records every connection opened or closed here since the last round, in their order, each in a
    /// transaction of its own sent back to back: one round trip for all, so that a crowd connecting
    /// (or the crowd before it leaving) does not hold the next devices' presence, and so their
    /// messages, a round trip per device. Then each new device reads its backlog.
    private func recordPresence() {
        while true {
            let batch = presenceChanges.take()
            if batch.isEmpty { return }
            do {
                try connection.withSession { s in
                    for change in batch {
                        switch change {
                        case .online(let token, _):
                            s.send("BEGIN")
                            // Presence is rebuilt by the devices' reconnections if PostgreSQL loses it;
                            // what matters is its order against enqueues (the lock), which a commit not
                            // waited for on disk keeps.
                            s.send("SET LOCAL synchronous_commit = off")
                            // The device's lock orders this against every enqueue for the device.
                            s.send("SELECT ccs_lock_device(device_key) FROM device WHERE token = $1", binds(token))
                            s.send("""
                                INSERT INTO device_presence(token, node, since) VALUES ($1, $2, ccs_now_ms())
                                ON CONFLICT(token) DO UPDATE SET node = EXCLUDED.node, since = EXCLUDED.since
                                """, binds(token, nodeID))
                            s.send("SELECT pg_notify('\(Self.presenceChannel)', $1)",
                                   binds(seal.seal(token + " " + nodeID, channel: Self.presenceChannel)))
                            s.send("COMMIT")
                        case .offline(let token):
                            // Announced only if it was still here: it may have connected to another node
                            // since. One statement: a transaction of its own.
                            s.send("""
                                WITH gone AS (DELETE FROM device_presence WHERE token = $1 AND node = $2 RETURNING token)
                                SELECT pg_notify('\(Self.presenceChannel)', $3) FROM gone
                                """, binds(token, nodeID, seal.seal(token + " -" + nodeID, channel: Self.presenceChannel)))
                        }
                    }
                }
            } catch {
                // Messages from other nodes then wait for the sweep (a failed one rolled back alone).
                logger.warning("recording devices' presence failed", metadata: ["error": "\(error)"])
            }
            for case .online(_, let then) in batch { then() }
        }
    }

    public func claimOutbound(senderID: String) {
        queue.async { [self] in claim(senders: [senderID]) }
    }

    public func releaseOutbound(_ records: [OutboundRecord], then: @escaping @Sendable () -> Void) {
        guard !records.isEmpty else { return then() }
        queue.async { [self] in
            defer { then() }
            do {
                try connection.transaction { s in
                    for r in records {
                        s.send("""
                            UPDATE outbound SET owner = NULL
                            WHERE sender_id = $1 AND kind = $2 AND token = $3 AND message_id = $4 AND owner = $5
                            """, binds(r.senderID, r.kind.rawValue, r.token, r.messageID, nodeID))
                    }
                    for sender in Set(records.map(\.senderID)) {
                        s.send("SELECT pg_notify('\(Self.outboundChannel)', $1)", binds(sender))
                    }
                }
            } catch {
                // They stay this node's until its lease ends; then any node takes them.
                logger.warning("releasing upstream messages failed", metadata: ["error": "\(error)"])
            }
        }
    }

    public func node(holding token: String) -> String? {
        presence.withLock { $0[token] }
    }

    public func offerLive(_ message: QueuedMessage, to node: String) {
        if links?.offer(message, to: node) == true { return }
        let line = LiveNotifier.line(message)
        let header = LiveNotifier.Header.offer(from: nodeID)
        // No link up to that node (yet): through PostgreSQL. Too big for a notification: it goes the
        // durable way (written, then announced by its token).
        guard LiveNotifier.fits(line, header: header) else { return }
        live.post(line, header: header, channel: Self.nodeChannelPrefix + node)
    }

    public func confirmLive(deviceMessageID: String, to node: String) {
        if links?.confirm(deviceMessageID, to: node) == true { return }
        live.post(deviceMessageID, header: .confirmation, channel: Self.nodeChannelPrefix + node)
    }

    /// Offers and confirmations, over a link or through NOTIFY.
    func linkReceived(_ frame: LinkFrames.Decoded) {
        guard let events = events.withLock({ $0?.value }) else { return }
        switch frame {
        case .offers(let node, let messages): events.clusterLiveOffered(messages, from: node)
        case .confirmations(let ids): events.clusterLiveConfirmed(deviceMessageIDs: ids)
        }
    }

    /// A presence announcement, sealed by a node: "token node" (connected there) or "token -node"
    /// (gone from there); "* -node": the node left.
    func presenceChanged(_ sealed: String) {
        guard let payload = seal.open(sealed, channel: Self.presenceChannel) else { return refuse(Self.presenceChannel) }
        guard let space = payload.lastIndex(of: " ") else { return }
        let token = String(payload[..<space])
        var node = payload[payload.index(after: space)...]
        let gone = node.first == "-"
        if gone { node = node.dropFirst() }
        presence.withLock { map in
            if token == "*" {
                if gone { map = map.filter { $0.value != node } }
            } else if gone {
                if map[token].map({ $0 == node }) == true { map[token] = nil }
            } else {
                map[token] = node == nodeID ? nil : String(node)
            }
        }
    }

    public func outboundHeldElsewhere() throws -> [OutboundRecord] {
        try store.read { s in
            try s.rows("""
                SELECT sender_id, kind, message_id, token, json, created_at, expires_at, about_message_id FROM outbound
                WHERE owner IS DISTINCT FROM $1 ORDER BY seq
                """, binds(nodeID)).map(PostgresStore.outbound(from:))
        }
    }

    // MARK: on the queue

    /// Takes the senders' items that no live node holds, oldest first, and hands them to the engine.
    private func claim(senders: [String]) {
        guard !senders.isEmpty else { return }
        claim(where: "sender_id = ANY($2)", binds(nodeID, senders))
    }

    /// Takes items no live node holds whose time ran out, wherever their sender is: this node gives
    /// them up (the device of an upstream message gets `send_error`), as it does its own.
    private func claimExpired(now: Int64) {
        claim(where: "expires_at <= $2", binds(nodeID, now))
    }

    private func claim(where condition: String, _ arguments: PostgresBindings) {
        guard let events = events.withLock({ $0?.value }) else { return }
        let records: [OutboundRecord]
        do {
            records = try connection.withSession { s in
                try s.rows("""
                    UPDATE outbound SET owner = $1
                    WHERE \(condition) AND (owner IS NULL OR owner NOT IN (
                      SELECT id FROM cluster_node WHERE lease_until > ccs_now_ms()))
                    RETURNING sender_id, kind, message_id, token, json, created_at, expires_at, about_message_id, seq
                    """, arguments).map { row -> (Int64, OutboundRecord) in
                    (try row.makeRandomAccess()[8].decode(Int64.self), try PostgresStore.outbound(from: row))
                }.sorted { $0.0 < $1.0 }.map(\.1)
            }
        } catch {
            logger.warning("taking upstream messages failed", metadata: ["error": "\(error)"])
            return
        }
        if !records.isEmpty { events.clusterClaimed(records) }
    }

    private func tick() {
        do {
            try connection.withSession { s in
                try s.execute("UPDATE cluster_node SET lease_until = ccs_now_ms() + $2 WHERE id = $1", binds(nodeID, leaseMillis))
            }
        } catch {
            logger.warning("renewing the node's lease failed", metadata: ["error": "\(error)"])
        }
        let lost = listener.withLock { $0 == nil || $0!.isClosed }
        if lost {
            listen()
        }
        guard let events = events.withLock({ $0?.value }) else { return }
        claim(senders: events.clusterConnectedSenders())
        claimExpired(now: events.clusterClockMillis())
        // Every few renewals, or after the listener was lost: devices here with messages waiting.
        let n = ticks.withLock { n -> Int in n += 1; return n }
        if lost || n % 5 == 0 { sweepQueues(events, olderThan: lost ? .max : events.clusterClockMillis() - 5_000) }
        if lost { events.clusterRegistryChanged(.everything) }
    }

    /// The devices held here with a message queued before `olderThan` (engine clock): a message whose
    /// announcement was lost. Newer ones are on their way, and reading every busy device's queue
    /// each time would cost the writer more than the announcements save.
    private func sweepQueues(_ events: any ClusterEvents, olderThan: Int64) {
        do {
            let tokens = try connection.withSession { s in
                try s.rows("""
                    SELECT p.token FROM device_presence p JOIN device d ON d.token = p.token
                    WHERE p.node = $1 AND EXISTS (
                      SELECT 1 FROM queued_message q WHERE q.device_key = d.device_key AND q.enqueued_at < $2)
                    LIMIT 10000
                    """, binds(nodeID, olderThan)).map { try $0.makeRandomAccess()[0].decode(String.self) }
            }
            for token in tokens { events.clusterQueueChanged(token: token) }
        } catch {
            logger.warning("the queue sweep failed", metadata: ["error": "\(error)"])
        }
    }

    /// Opens the listening connection and listens on this node's channel, the registry's and the
    /// outbound one's. Notifications arrive on the event loop and are handled on the queue.
    private func listen() {
        listener.withLock { slot in
            if let old = slot { _ = try? old.close().wait() }
            slot = nil
            do {
                let opened = try PostgresConnection.connect(on: store.group.next(), configuration: store.url.configuration(),
                                                            id: 1_000_000, logger: logger).wait()
                for name in [channel, Self.registryChannel, Self.outboundChannel, Self.presenceChannel] {
                    _ = opened.addListener(channel: name) { [weak self] _, note in
                        guard let self else { return }
                        let payload = note.payload
                        let channel = note.channel
                        if channel == Self.presenceChannel { return self.presenceChanged(payload) }
                        // Offers and confirmations are handled here, on the listener's event loop: the
                        // engine only hands over and answers (no waiting), and a hop to a queue cost
                        // a thread wake-up per notification. Their order against the announcements
                        // on the queue does not matter (`DeliveryCore.take`).
                        if channel == self.channel, payload.utf8.first == NotifySeal.marker {
                            return self.notified(channel: channel, payload: payload)
                        }
                        (channel == self.channel ? self.announcements : self.queue).async {
                            self.notified(channel: channel, payload: payload)
                        }
                    }
                }
                // A round trip after the LISTENs: they are in force once it returns. The devices' nodes
                // are read after it, so no announcement falls between the read and the listening.
                _ = try opened.query("SELECT 1", logger: logger).wait()
                let known = try opened.query("""
                    SELECT p.token, p.node FROM device_presence p JOIN cluster_node c ON c.id = p.node
                    WHERE p.node <> \(nodeID) AND c.lease_until > ccs_now_ms()
                    """, logger: logger).wait()
                var map: [String: String] = [:]
                for row in known.rows {
                    let (token, node) = try row.decode((String, String).self)
                    map[token] = node
                }
                presence.withLock { $0 = map }
                slot = opened
            } catch {
                logger.warning("listening for the other nodes failed; retrying at the next renewal", metadata: ["error": "\(error)"])
            }
        }
    }

    /// A message as `ccs_enqueue` announces it (json_build_object of its row).
    static func message(fromAnnouncement text: String) -> QueuedMessage? {
        guard let o = try? JSONValue.parse(text).objectValue,
              let token = o["token"]?.stringValue, let id = o["id"]?.stringValue, let sender = o["sender"]?.stringValue,
              let appID = o["app_id"]?.stringValue, let priority = o["priority"]?.stringValue,
              let ttl = o["ttl"]?.intValue, let enqueued = o["enqueued"]?.intValue, let expires = o["expires"]?.intValue,
              let kind = o["kind"]?.stringValue.flatMap(MessageKind.init(rawValue:)), let payload = o["payload"]?.stringValue
        else { return nil }
        return QueuedMessage(token: token, deviceMessageID: id, senderID: sender, appMessageID: appID,
                             collapseKey: o["key"]?.stringValue, priority: priority, timeToLive: Int(ttl),
                             enqueuedAt: enqueued, expiresAt: expires, deliveryReceiptRequested: o["receipt"]?.intValue == 1,
                             delayWhileIdle: o["dwi"]?.intValue == 1, isNotification: o["notification"]?.intValue == 1,
                             kind: kind, payload: payload, platformBlocks: o["blocks"]?.stringValue)
    }

    private func notified(channel: String, payload: String) {
        guard let events = events.withLock({ $0?.value }) else { return }
        switch channel {
        case self.channel:
            switch NodeChannelNotice.read(payload, channel: channel, seal: seal) {
            case .live(let live): linkReceived(live)
            case .queueChanged(let token): events.clusterQueueChanged(token: token)
            case .refused: refuse(channel)
            }
        case Self.outboundChannel:
            if events.clusterConnectedSenders().contains(payload) { claim(senders: [payload]) }
        case Self.registryChannel:
            guard let object = try? JSONValue.parse(payload).objectValue,
                  object["n"]?.stringValue != nodeID, let value = object["v"]?.stringValue else { return }
            switch object["k"]?.stringValue {
            case "device": events.clusterRegistryChanged(.device(token: value))
            case "sender": events.clusterRegistryChanged(.sender(id: value))
            case "subscriptions": events.clusterRegistryChanged(.subscriptions(token: value))
            case "group": events.clusterRegistryChanged(.deviceGroup(id: value))
            case "everything": events.clusterRegistryChanged(.everything)
            // A hint only: the time is read from the meta table, which only the emulator's role may write
            // (any role may NOTIFY; one sent the year 9999 and every node followed: issue 39).
            case "clock":
                guard let stored = try? store.meta(MetaKey.virtualClock), let millis = Int64(stored) else { return }
                events.clusterRegistryChanged(.clock(millis: millis))
            default: break
            }
        default:
            break
        }
    }

    /// A notification that no node sent (not sealed with the cluster's key, or not a hint) is dropped;
    /// the first and then every thousandth is logged, so that a flood does not flood the log too.
    private func refuse(_ channel: String) {
        let n = refused.withLock { n -> Int in n += 1; return n }
        if n % 1_000 == 1 {
            logger.warning("a notification not sent by a node of this cluster was dropped",
                           metadata: ["channel": "\(channel)", "dropped": "\(n)"])
        }
    }
}
