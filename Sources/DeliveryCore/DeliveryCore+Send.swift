import PushDomain
import StoreModel
import PlatformRendering

/// A downstream message's two events in the core: its look-up (the checks in FCM's order, and a new
/// device message id), and, once the host has built the stored message outside the lock, its
/// submission (hand it over now, store it, or drop it).
extension DeliveryCore {
    /// Who a message comes from: an FCM sender, or an APNs provider (the sender is then the bundle id,
    /// already checked against the registration by the APNs look-up).
    package enum Origin: Sendable {
        case fcm
        case apns(deviceToken: String)
    }

    /// What the send needs of the installation a token names. Only this leaves the lock: a whole
    /// record would be a dozen retains per message.
    package struct Recipient: Sendable, Equatable {
        package let app: String
        package let platform: Platform
        package let deviceMessageID: String
        package let deviceState: DeviceState
        /// Connected, with its backlog handed over: it may take the message now.
        package let takesNow: Bool
        /// The installation's first token (`DeviceRecord.token`), which the message is stored under.
        package let installation: String
        /// The newest token of a refreshed installation, when the message named an older one.
        package let canonical: String?
    }

    /// The installation `given` names and what the send needs of it, or why FCM refuses the message
    /// (the checks in FCM's order; the per-device rate counts client errors too). `nowMicros` is the
    /// clock's, for the new device message id.
    package mutating func lookUp(_ message: Message, given: String, senderID: String, origin: Origin,
                                 now: Int64, nowMicros: Int64) -> Result<Recipient, SendError> {
        guard let device = registry.installation(given) else { return .failure(.invalidRegistration(token: given)) }
        let to = device.token
        if device.status != .active { return .failure(.unregistered(token: given)) }
        if case .fcm = origin, !device.senders.contains(senderID) {
            return .failure(.senderMismatch(token: to, sender: senderID))
        }
        if let package = message.restrictedPackageName, package != device.app {
            return .failure(.packageMismatch(token: to, package: package))
        }
        // FCM's per-device limit counts what app servers send (a dry run goes nowhere; APNs has
        // no such answer). Counted before the later checks, as FCM counts client errors too.
        if case .fcm = origin, !message.dryRun, deviceRates != nil, let wait = deviceRates!.admit(to, now: now) {
            return .failure(.deviceMessageRateExceeded(token: to, retryAfterMillis: wait))
        }
        let id = DeviceMessageID.make(micros: nextMicros(now: nowMicros), senderHash: DeviceMessageID.senderHash(senderID))
        return .success(Recipient(app: device.app, platform: device.platform, deviceMessageID: id,
                                  deviceState: registry.deviceStates[to] ?? DeviceState(),
                                  takesNow: sessions.online[to]?.loaded == true, installation: to,
                                  canonical: device.refreshedTokens.last.flatMap { $0 == given ? nil : $0 }))
    }

    /// What the host does with a submitted message.
    package enum Submission: Equatable {
        /// Handed over now: `handOver` goes to the connection, and the message's write (`write`, which
        /// the early delivery's ticket may call off) follows in the background, after `collapse` when
        /// given (an older message with this key held back must go even when this one never reaches
        /// the disk). The answer follows the commit, or the device's confirmation if that comes first.
        case live(handOver: [DeviceEffect], collapse: StoreOp?, write: StoreOp)
        /// Write it; once committed it is handed over (`handOver(_:to:now:)`) and answered. `effects`:
        /// what a hand-over that took nothing still reported (the throttle held it back), first.
        case stored(StoreOp, effects: [DeviceEffect])
        /// A time to live of 0 and no device to take it now: dropped, never stored (accepted).
        case dropped(effects: [DeviceEffect])
        /// Uninstalled since its look-up.
        case unregistered
    }

    /// One message's submission. The installation check and the writes share the host's critical
    /// section: an uninstall (which marks the device and submits its queue's removal under that lock)
    /// comes either before (NACK) or after (its removal follows this write), never between. `early`:
    /// the device took messages at the look-up, so it may be handed over now, before its write.
    package mutating func submit(_ queued: QueuedMessage, early: EarlyDelivery?, limits: QueueLimits?, now: Int64) -> Submission {
        let to = queued.token
        guard registry.devices[to]?.status == .active else { return .unregistered }
        var effects: [DeviceEffect] = []
        if let early, sessions.online[to]?.loaded == true {
            // If the device confirms it before the writer gets to it, the write is called off and the
            // answer follows the confirmation; otherwise the answer follows the commit, as for every message.
            let handOver = take([queued], token: to, early: early, now: now)
            if handOver.contains(where: \.isDelivery) {
                let collapse = queued.collapseKey.flatMap { key in
                    needsCollapse(queued, token: to) ? StoreOp.collapse(token: to, collapseKey: key) : nil
                }
                return .live(handOver: handOver, collapse: collapse, write: .enqueue(queued, limits: nil))
            }
            // It went offline (or to sleep) in between, or its window is full (or holds messages back
            // in the store): store it like any other message, behind those.
            effects = handOver
            if queued.timeToLive == 0 { return .dropped(effects: effects) }
        }
        if queued.kind == .apnsNotification { sessions.modify(to) { $0.storedAPNsNotification() } }
        var stored = limits ?? storageLimits(token: to, senderID: queued.senderID, now: now)
        // The 100-message limit is on what waits, not on what the device's connection holds: a
        // connected device whose window is full would otherwise lose its messages as soon as one
        // more came (the rows of its window count in the store).
        if queued.collapseKey == nil { stored.maxNonCollapsible += sessions.online[to]?.heldNonCollapsible ?? 0 }
        return .stored(.enqueue(queued, limits: stored), effects: effects)
    }

    /// The store's limits for one device's queue, with the notice that replaces what overflows.
    package func storageLimits(token: String, senderID: String, now: Int64) -> QueueLimits {
        Self.storageLimits(settings, token: token, senderID: senderID, now: now)
    }

    /// The same, for a host that builds them before its critical section.
    package static func storageLimits(_ settings: Settings, token: String, senderID: String, now: Int64) -> QueueLimits {
        QueueLimits(maxCollapseKeys: settings.maxCollapseKeys, maxNonCollapsible: settings.maxStoredNonCollapsible,
                    overflowNotice: deletedMessagesNotice(token: token, senderID: senderID, now: now))
    }

    /// FCM's `deleted_messages` notice: the device lost messages it will not get.
    package static func deletedMessagesNotice(token: String, senderID: String, now: Int64) -> QueuedMessage {
        let id = "deleted:\(now)"
        let payload = JSONValue.object([
            "message_type": .string("deleted_messages"), "message_id": .string(id), "sent_time": .int(now),
        ]).encoded()
        return QueuedMessage(token: token, deviceMessageID: id, senderID: senderID, appMessageID: "",
                             collapseKey: nil, priority: Priority.high.rawValue,
                             timeToLive: Message.maximumTimeToLive, enqueuedAt: now,
                             expiresAt: now + Int64(Message.maximumTimeToLive) * 1000,
                             deliveryReceiptRequested: false, kind: .deletedMessages, payload: payload)
    }

    /// Apple keeps only the most recent notification per app while the device is offline. A device
    /// here runs one app, so one collapse key per device expresses the rule with the store's own
    /// collapse: a newer APNs notification replaces the stored one (docs/apns.md).
    package static let apnsStoreAndForwardKey = "apns:store-and-forward"

    /// Whether a message handed over live must still collapse older ones in the store. Always, but for
    /// Apple's store-and-forward key of a single node's connected device that is known to hold no
    /// other APNs notification: none was in its queue when it connected, none was stored since, and
    /// no other is on the connection (one confirmed has left it; its removal, if it was written,
    /// follows its write). Every notification of a device streaming them submitted a collapse that
    /// found nothing: the writer's largest work on the APNs path (docs/benchmarks.md).
    package func needsCollapse(_ m: QueuedMessage, token: String) -> Bool {
        guard m.kind == .apnsNotification, m.collapseKey == Self.apnsStoreAndForwardKey, !settings.clustered,
              let online = sessions.online[token], online.apnsStored == .holdsNone else { return true }
        for (id, other) in online.inFlight where id != m.deviceMessageID && other.message.kind == .apnsNotification {
            return true
        }
        return false
    }

    /// Whether a message for a device on another node may go there before it is written: one the app
    /// takes now and whose confirmation is all there is to it. A notification bound for the tray and a
    /// message with a receipt are removed together with their tray entry or receipt, in one commit on
    /// the device's node, so they go the durable way.
    package static func mayOffer(_ m: QueuedMessage, deviceState: DeviceState, platform: Platform) -> Bool {
        m.kind == .message && !m.deliveryReceiptRequested && !(m.isNotification && !deviceState.foreground)
            && deviceState.admits(m, platform: platform)
    }
}

extension DeviceEffect {
    /// Whether this hands messages to a connection.
    package var isDelivery: Bool {
        if case .deliver = self { return true }
        return false
    }
}
