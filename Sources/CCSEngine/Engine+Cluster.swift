import DeliveryCore
import StoreModel

/// This node's side of a cluster (docs/scaling.md): what the other nodes' writes mean here.
extension Engine: ClusterEvents {
    /// How old (engine clock) an offer from another node may be and still be handed over: far more
    /// than a live-write delay and a round trip, and than the clocks of two machines differ.
    static let offerFreshnessMillis: Int64 = 60_000

    /// Another node committed messages for a device connected here: hand over what it may take.
    public func clusterQueueChanged(token: String) {
        let link = shard(token).withLock { s -> (any DeviceLink)? in
            guard let online = s.sessions.online[token], online.loaded else { return nil }
            return s.deviceLinks[online.connection]
        }
        if let link { deliverBacklog(token: token, link: link) }
    }

    public func clusterMessageCommitted(_ message: QueuedMessage) {
        handOver([message], to: message.token)
    }

    /// Another node's messages for devices connected here, before their write: handed over like a
    /// live delivery; the device's confirmation goes back to that node. What this node would not hand
    /// over now (the device left, sleeps, its app went to the background, or its window is full) is
    /// left to the write.
    public func clusterLiveOffered(_ messages: [QueuedMessage], from node: String) {
        var order: [String] = []
        var byToken: [String: [QueuedMessage]] = [:]
        let now = clock.nowMillis()
        // An offer is for now: its node writes the message within its live-write delay (at most 1 s)
        // unless the device confirms it first. One much older is out of date or a replay (a sealed
        // NOTIFY payload can be recorded and sent again: docs/scaling.md); the write brings it.
        for m in messages where m.enqueuedAt > now - Self.offerFreshnessMillis {
            if byToken[m.token] == nil { order.append(m.token) }
            byToken[m.token, default: []].append(m)
        }
        for token in order {
            let sends = shard(token).withLock { s in
                apply(s.core.liveOffered(byToken[token]!, to: token, from: node, now: now), &s)
            }
            perform(sends)
        }
    }

    /// The devices of another node confirmed messages offered from here: their writes are called off
    /// where the writer has not taken them yet, and their senders answered. A write already taken
    /// answers on its commit, and is removed after it: here, and also by the device's node, to which
    /// the commit is announced (whichever comes first; a second removal finds nothing).
    public func clusterLiveConfirmed(deviceMessageIDs: [String]) {
        var settled: [(Offered, EarlyWrite)] = []
        var removals: [StoreOp] = []
        // Each offer is in its device's shard (and the shards' ids are apart: one shard finds it).
        for shard in shards {
            shard.withLock { s in Self.confirmOffers(deviceMessageIDs, &s, settled: &settled, removals: &removals) }
        }
        if !removals.isEmpty { committer.submit(removals) }
        for (o, early) in settled {
            early.settle(.accepted(token: o.message.token, deviceMessageID: o.message.deviceMessageID))
        }
    }

    /// One shard's part of `clusterLiveConfirmed`: the offers it holds of `ids`.
    private static func confirmOffers(_ ids: [String], _ s: inout State, settled: inout [(Offered, EarlyWrite)],
                                      removals: inout [StoreOp]) {
        for id in ids {
            switch s.sessions.confirmOffer(id) {
            case .pending(let o):
                // The host calls the write off (its ticket takes the writer's lock), then tells the core.
                if let early = s.earlyWrite(o.early), early.ticket.cancel() {
                    s.sessions.offerCalledOff(id)
                    _ = s.forget(o.early)
                    settled.append((o, early))
                } else {
                    s.sessions.offerTaken(id)
                }
            case .written(let token): removals.append(.removeMessage(token: token, deviceMessageID: id))
            case .unknown: break
            }
        }
    }

    /// Gives items up to the other nodes (`OutboundEffect.release`); the router lists them as
    /// releasing, for the admin view, until the release commits.
    func release(_ records: [OutboundRecord]) {
        guard let cluster, !records.isEmpty else { return }
        cluster.releaseOutbound(records) { [self] in handleOutbound(.releaseCommitted(records)) }
    }

    public func clusterClaimed(_ records: [OutboundRecord]) {
        for r in records { enqueueOutbound(r) }
    }

    public func clusterConnectedSenders() -> [String] {
        state.withLock { s in s.outbound.connectionsBySender.keys.filter { s.outbound.hasOpenConnection(sender: $0) } }
    }

    public func clusterClockMillis() -> Int64 { clock.nowMillis() }

    /// Reads again what another node changed. A read that fails leaves the old state; the next change
    /// (or a restart) reads it again.
    public func clusterRegistryChanged(_ change: RegistryChange) {
        do {
            switch change {
            case .device(let token):
                let record = try store.device(token: token)
                everywhere { s in
                    if let record { s.registry.add(record) } else { s.registry.remove(token) }
                }
                let online = shard(token).withLock { s in s.sessions.online[token]?.loaded == true ? s.link(of: token) : nil }
                // A state change (out of Doze, to the foreground) may admit what waits.
                if let online { deliverBacklog(token: token, link: online) }
            case .sender(let id):
                let record = try store.sender(id: id)
                everywhere { s in
                    if let record { s.registry.setSender(record) } else { s.registry.removeSender(id) }
                }
            case .subscriptions(let token):
                let subscriptions = try store.subscriptions(token: token)
                everywhere { s in
                    _ = s.topics.removeAll(token: token)
                    for t in subscriptions { _ = s.topics.add(.init(senderID: t.senderID, name: t.topic), token: token, at: t.addedAt) }
                }
            case .deviceGroup(let id):
                let record = try store.deviceGroup(id: id)
                everywhere { $0.groups.restore(record, id: id) }
            case .clock(let millis):
                // Forward only: a node never takes back time it has shown (an older announcement,
                // or this node's own later advance, wins).
                guard let virtual = clock as? VirtualClock, virtual.advance(toMillis: millis) else { return }
                tick()
            case .everything:
                let senders = try store.loadSenders()
                let devices = try store.loadDevices()
                let subscriptions = try store.loadSubscriptions()
                let groups = try store.loadDeviceGroups()
                everywhere { s in
                    s.registry.replaceSenders(senders)
                    s.registry.removeAllDevices()
                    for d in devices { s.registry.add(d) }
                    s.topics = TopicRegistry()
                    for t in subscriptions { _ = s.topics.add(.init(senderID: t.senderID, name: t.topic), token: t.token, at: t.addedAt) }
                    s.groups = DeviceGroupRegistry(groups)
                }
            }
        } catch {
            logger.warning("reading another node's change failed", metadata: ["change": "\(change)", "error": "\(error)"])
        }
    }
}
