import StoreModel
import PushDomain

/// The device sessions: which devices are connected (one connection each, a newer connection replaces
/// the older), what each holds written and unconfirmed, and, on a shared store, the messages this
/// node offered another node's device before their write. Admission (Doze, the iOS foreground
/// rule) reads the registry's device state; the hand-over is in Engine+Devices.swift.
package struct DeviceSessions {
    package init() {}

    /// Connected devices by registration token (the installation's first): one connection each.
    package private(set) var online: [String: OnlineDevice] = [:]
    /// Messages offered to the device's node before their write (by device message id): its
    /// confirmation calls the write off and answers the sender (Engine+Cluster.swift).
    package private(set) var offered: [String: Offered] = [:]
    /// Offered messages whose write committed before any confirmation came: a confirmation that
    /// comes later removes them (the newest `writtenOffersKept`).
    private var writtenOffers = RecentMap<String>(capacity: DeviceSessions.writtenOffersKept)
    /// Tray entries being tapped ("token id"): a second tap of the same one finds nothing.
    private var taps: Set<String> = []

    // MARK: connections

    /// A device connection is up; returns what the older connection it replaces held (to be closed).
    package mutating func connect(_ token: String, connection: DeviceConnectionID, platform: Platform?) -> OnlineDevice? {
        online.updateValue(OnlineDevice(connection: connection, platform: platform), forKey: token)
    }

    /// The connection went down; returns what it held, nil when a newer connection had already
    /// replaced it.
    package mutating func disconnect(_ token: String, connection: DeviceConnectionID) -> OnlineDevice? {
        guard online[token]?.connection == connection else { return nil }
        return online.removeValue(forKey: token)
    }

    /// Takes the device offline at once (an uninstall, a reset); returns what its connection held
    /// (the connection is to be closed).
    package mutating func drop(_ token: String) -> OnlineDevice? {
        online.removeValue(forKey: token)
    }

    /// Takes every device offline; returns what their connections held (to be closed).
    package mutating func dropAll() -> [OnlineDevice] {
        defer { online = [:] }
        return Array(online.values)
    }

    /// Whether `connection` is the device's current one.
    package func isCurrent(_ token: String, _ connection: DeviceConnectionID) -> Bool {
        online[token]?.connection == connection
    }

    /// Changes one connection in place (its own methods keep its window and counts), when it is
    /// the one connected, and `connection` when given; nil otherwise. In place through the
    /// dictionary's index: a copy of the entry would share, and then copy, its in-flight map.
    package mutating func modify<R>(_ token: String, connection: DeviceConnectionID? = nil, _ body: (inout OnlineDevice) -> R) -> R? {
        guard let at = online.index(forKey: token) else { return nil }
        if let connection, online.values[at].connection != connection { return nil }
        return body(&online.values[at])
    }

    // MARK: offers between nodes

    package mutating func offer(_ offer: Offered, id: String) {
        offered[id] = offer
    }

    /// The offer's write committed (or failed): it is no longer pending. Returns it; a written
    /// offer nobody confirmed yet is remembered, so that a later confirmation removes it.
    package mutating func offerWritten(_ id: String, token: String, succeeded: Bool) -> Offered? {
        guard let o = offered.removeValue(forKey: id) else { return nil }
        if !o.confirmed && succeeded { writtenOffers.insert(id, token) }
        return o
    }

    /// The device confirmed an offered message.
    package enum OfferConfirmation {
        /// Its write is pending: the host tries to call it off (`offerCalledOff`, `offerTaken`).
        case pending(Offered)
        /// Written before this confirmation: remove the message from this token's queue.
        case written(token: String)
        case unknown
    }

    /// What a confirmation of the offered message `id` finds. A pending write is the host's to call
    /// off (the writer may be taking it now); it then says which way it went.
    package mutating func confirmOffer(_ id: String) -> OfferConfirmation {
        if let o = offered[id] { return .pending(o) }
        return writtenOffers.take(id).map { .written(token: $0) } ?? .unknown
    }

    /// The confirmed offer's write was called off: it is no longer pending (answer the sender now).
    package mutating func offerCalledOff(_ id: String) { offered[id] = nil }

    /// The writer had taken the confirmed offer's write: its commit removes the message.
    package mutating func offerTaken(_ id: String) { offered[id]?.confirmed = true }

    // MARK: taps

    /// Claims a tray entry for one tap; false while another tap of it is under way.
    package mutating func claimTap(_ claim: String) -> Bool { taps.insert(claim).inserted }

    package mutating func endTap(_ claim: String) { taps.remove(claim) }
}

package struct InFlightDownstream {
    package var message: QueuedMessage
    package var toTray: Bool
    /// Handed over before it was committed: its write may still be called off, and then the
    /// app server's ACK comes from the device's confirmation instead of the commit.
    package var early: EarlyDelivery? = nil
    /// Offered by this node (its id) before it was written there: the device's confirmation goes
    /// back to it, and this node removes nothing. Nil once the message is known written (its
    /// commit was announced, or it was read from the store).
    package var offeredBy: String? = nil

    package init(message: QueuedMessage, toTray: Bool, early: EarlyDelivery? = nil, offeredBy: String? = nil) {
        self.message = message
        self.toTray = toTray
        self.early = early
        self.offeredBy = offeredBy
    }
}

/// A message handed over before its write committed: the write may still be called off, and then
/// the answer to its request comes from the device's confirmation instead of the commit. The host
/// holds the write's ticket and the request's answer under these ids (`Engine.EarlyWrites`).
package struct EarlyDelivery: Hashable, Sendable {
    package let write: WriteID

    package init(write: WriteID) { self.write = write }
}

package struct OnlineDevice {
    package let connection: DeviceConnectionID
    /// The device's platform (fixed for a registration), kept here for the hand-over path.
    package var platform: Platform?

    package init(connection: DeviceConnectionID, platform: Platform?) {
        self.connection = connection
        self.platform = platform
    }

    /// False until the queue as of connection time has been read and handed over.
    package private(set) var loaded = false
    /// Written to this connection and not yet ACKed by the device: at most the window
    /// (`Configuration.deviceWindow`), so that a device that reads and never ACKs holds a bounded
    /// number of messages (with their payloads) in memory; the rest wait in the store.
    /// Changed only through `hold` and `release`, which keep `heldNonCollapsible` with it.
    package private(set) var inFlight: [String: InFlightDownstream] = [:]
    /// How many of `inFlight` are messages without a collapse key: they are in the device's queue,
    /// and its limit of 100 such messages is on what waits besides them (`Engine.send`). Kept
    /// with the map, not counted per stored message (that was the window's length under the lock
    /// for every message to a device whose window is full).
    package private(set) var heldNonCollapsible = 0
    /// The window kept a message back: the store may hold messages not on this connection that
    /// it would take now. Until a backlog read hands them over (in the queue's order), no message
    /// goes to the connection by another way, so none overtakes them.
    package private(set) var heldBack = false
    /// A backlog read to refill the window is on its way (one at a time).
    package private(set) var refilling = false
    /// The newest messages the device ACKed on this connection: a queue read before their removal
    /// commits, or another node's announcement of one, must not hand them over again.
    package private(set) var confirmed = RecentMap<MessageIdentity>(capacity: DeviceSessions.confirmationsKept)
    /// Of those, the ones offered by another node and confirmed back to it: if their write is
    /// announced after all, this node removes them.
    package private(set) var confirmedOffers = RecentMap<MessageIdentity>(capacity: DeviceSessions.confirmationsKept)
    /// Whether the store may hold an APNs notification of this device that is not on this
    /// connection (Apple's store-and-forward collapse would have to remove it).
    package private(set) var apnsStored = APNsStoredKnowledge.unknown

    package mutating func hold(_ entry: InFlightDownstream, id: String) {
        if let replaced = inFlight.updateValue(entry, forKey: id), Self.counts(replaced) { heldNonCollapsible -= 1 }
        if Self.counts(entry) { heldNonCollapsible += 1 }
    }

    package mutating func release(_ id: String) -> InFlightDownstream? {
        guard let entry = inFlight.removeValue(forKey: id) else { return nil }
        if Self.counts(entry) { heldNonCollapsible -= 1 }
        return entry
    }

    /// The device confirmed `id`: it leaves the window. Returns the entry, the write the host should
    /// try to call off (`remember` then records which way it went), and the connection when the
    /// window should be refilled from the store.
    package mutating func confirm(_ id: String, window: Int) -> Confirmation? {
        guard let entry = release(id) else { return nil }
        let refill = startsRefill(window: window) ? connection : nil
        // Confirmed before its write was taken: the write is called off, at once, so that it is known
        // now that the store never holds the message. Not for a notification bound for the tray and
        // a message with a receipt, whose removal must commit together with the tray entry or the
        // receipt (a crash never keeps one without the other).
        let mayCallOff = entry.offeredBy == nil && !entry.toTray && !entry.message.deliveryReceiptRequested
            ? entry.early?.write : nil
        return Confirmation(entry: entry, mayCallOff: mayCallOff, refill: refill)
    }

    /// After `confirm`: whether the host called the write off. Only a message the store may hold (or
    /// another node may announce) can be handed over again on this connection: a backlog read or a
    /// commit's hand-over after this confirmation must find it here. One never written cannot come
    /// back, and is not remembered.
    package mutating func remember(_ entry: InFlightDownstream, calledOff: Bool) {
        let identity = MessageIdentity(entry.message)
        if !calledOff { confirmed.insert(entry.message.deviceMessageID, identity) }
        if entry.offeredBy != nil { confirmedOffers.insert(entry.message.deviceMessageID, identity) }
    }

    /// The messages `deviceState` admits become in-flight, as many as the window has room for, in
    /// order (`DeliveryCore.take`); returns them. `admit` is the throttle's word on a message that fits.
    package mutating func take(_ messages: [QueuedMessage], fromBacklog: Bool, deviceState: DeviceState, written: Bool, window: Int,
                       removals: inout [StoreOp], admit: (QueuedMessage) -> Bool,
                       entry: (QueuedMessage, Bool) -> InFlightDownstream) -> [DeviceDelivery] {
        if fromBacklog {
            heldBack = false
        } else if heldBack {
            return []
        }
        var room = window - inFlight.count
        var deliveries: [DeviceDelivery] = []
        // A message already on this connection, or confirmed on it, is not handed over again (a
        // backlog read, a hand-over after a commit and another node's announcement may all hold it).
        for m in messages where deviceState.admits(m, platform: platform) {
            let id = m.deviceMessageID
            if let onConnection = inFlight[id] {
                // Offered by another node and written there after all: its confirmation now removes it here.
                if written && onConnection.offeredBy != nil { markWritten(id) }
                continue
            }
            let identity = MessageIdentity(m)
            if confirmed.contains(id, identity) {
                // Confirmed back to the node that offered it, which wrote it anyway: removed here.
                if written && confirmedOffers.contains(id, identity) {
                    removals.append(.removeMessage(token: m.token, deviceMessageID: id))
                }
                continue
            }
            // The window is full: this one and everything after it wait for the device's ACKs.
            guard room > 0 else {
                heldBack = true
                break
            }
            if !admit(m) { continue }
            room -= 1
            let d = DeviceDelivery(message: m, toTray: m.kind == .message && m.isNotification && !deviceState.foreground)
            hold(entry(m, d.toTray), id: id)
            deliveries.append(d)
        }
        return deliveries
    }

    /// A read of the queue failed; the next may start.
    package mutating func refillFailed() { refilling = false }

    /// An APNs notification was stored while connected: every newer one collapses.
    package mutating func storedAPNsNotification() { apnsStored = .mayHold }

    /// The queue as of connection time was read: later commits are handed over directly.
    package mutating func backlogRead(holdsAPNsNotification: Bool) {
        loaded = true
        refilling = false
        if apnsStored == .unknown { apnsStored = holdsAPNsNotification ? .mayHold : .holdsNone }
    }

    /// Offered by another node and known written since: its confirmation removes it here.
    package mutating func markWritten(_ id: String) { inFlight[id]?.offeredBy = nil }

    private static func counts(_ e: InFlightDownstream) -> Bool {
        e.message.kind == .message && e.message.collapseKey == nil
    }

    /// After a confirmation: whether the window, having kept messages back, has emptied to half
    /// (one read refills it for many confirmations, not one read per confirmation). True marks
    /// the read as on its way.
    package mutating func startsRefill(window: Int) -> Bool {
        guard heldBack, loaded, !refilling, inFlight.count <= window / 2 else { return false }
        refilling = true
        return true
    }
}

/// What this node knows of a connected device's stored APNs notifications (`Engine.needsCollapse`).
package enum APNsStoredKnowledge {
    /// Not yet: the queue as of connection time has not been read.
    case unknown
    /// The queue read at connection time held none, and none has been stored since.
    case holdsNone
    /// Some may be stored (read at connection, stored while connected): every newer one collapses.
    case mayHold
}

extension DeviceSessions {
    /// Confirmations remembered per connection (`OnlineDevice.confirmed`, `confirmedOffers`).
    package static let confirmationsKept = 256

    /// Device message id → token of the newest offered messages that were written unconfirmed. Enough
    /// for the confirmations of several seconds at the highest rate measured (about 20,000 messages a
    /// second across nodes): a confirmation comes within the live-write delay plus a round trip, or its
    /// device has left and confirms nothing.
    package static let writtenOffersKept = 65_536
}

/// What a device's confirmation found on its connection (`OnlineDevice.confirm`).
package struct Confirmation {
    package let entry: InFlightDownstream
    /// The write to call off, when the message may never reach the store.
    package let mayCallOff: WriteID?
    /// The connection whose window should be refilled from the store.
    package let refill: DeviceConnectionID?
}

package struct Offered {
    package let message: QueuedMessage
    package let early: EarlyDelivery
    /// Confirmed after the writer took its write: removed once that commits.
    package var confirmed = false

    package init(message: QueuedMessage, early: EarlyDelivery) {
        self.message = message
        self.early = early
    }
}
