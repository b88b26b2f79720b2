import StoreModel
import PushDomain

extension Engine {
    /// The device sessions: which devices are connected (one link each, a newer connection replaces
    /// the older), what each holds written and unconfirmed, and, on a shared store, the messages this
    /// node offered another node's device before their write. Admission (Doze, the iOS foreground
    /// rule) reads the registry's device state; the hand-over is in Engine+Devices.swift.
    struct DeviceSessions {
        /// Connected devices by registration token (the installation's first).
        var online: [String: OnlineDevice] = [:]
        /// Messages offered to the device's node before their write (by device message id): its
        /// confirmation calls the write off and answers the sender (Engine+Cluster.swift).
        var offered: [String: Offered] = [:]
        /// Offered messages whose write committed before any confirmation came: a confirmation that
        /// comes later removes them (the newest `writtenOffersKept`).
        var writtenOffers = RecentMap<String>(capacity: Engine.writtenOffersKept)
        /// Tray entries being tapped ("token id"): a second tap of the same one finds nothing.
        var taps: Set<String> = []
    }

    struct InFlightDownstream {
        var message: QueuedMessage
        var toTray: Bool
        /// Handed over before it was committed: its write may still be called off, and then the
        /// app server's ACK comes from the device's confirmation instead of the commit.
        var early: EarlyDelivery? = nil
        /// Offered by this node (its id) before it was written there: the device's confirmation goes
        /// back to it, and this node removes nothing. Nil once the message is known written (its
        /// commit was announced, or it was read from the store).
        var offeredBy: String? = nil
    }

    struct EarlyDelivery {
        let ticket: WriteTicket
        let settle: @Sendable (SendResult) -> Void
    }

    struct OnlineDevice {
        let link: any DeviceLink
        /// The device's platform (fixed for a registration), kept here for the hand-over path.
        var platform: Platform?

        init(link: any DeviceLink, platform: Platform?) {
            self.link = link
            self.platform = platform
        }

        /// False until the queue as of connection time has been read and handed over.
        var loaded = false
        /// Written to this connection and not yet ACKed by the device: at most the window
        /// (`Configuration.deviceWindow`), so that a device that reads and never ACKs holds a bounded
        /// number of messages (with their payloads) in memory; the rest wait in the store.
        /// Changed only through `hold` and `release`, which keep `heldNonCollapsible` with it.
        private(set) var inFlight: [String: InFlightDownstream] = [:]
        /// How many of `inFlight` are messages without a collapse key: they are in the device's queue,
        /// and its limit of 100 such messages is on what waits besides them (`Engine.send`). Kept
        /// with the map, not counted per stored message (that was the window's length under the lock
        /// for every message to a device whose window is full).
        private(set) var heldNonCollapsible = 0
        /// The window kept a message back: the store may hold messages not on this connection that
        /// it would take now. Until a backlog read hands them over (in the queue's order), no message
        /// goes to the connection by another way, so none overtakes them.
        var heldBack = false
        /// A backlog read to refill the window is on its way (one at a time).
        var refilling = false
        /// The newest messages the device ACKed on this connection: a queue read before their removal
        /// commits, or another node's announcement of one, must not hand them over again.
        var confirmed = RecentMap<MessageIdentity>(capacity: Engine.confirmationsKept)
        /// Of those, the ones offered by another node and confirmed back to it: if their write is
        /// announced after all, this node removes them.
        var confirmedOffers = RecentMap<MessageIdentity>(capacity: Engine.confirmationsKept)
        /// Whether the store may hold an APNs notification of this device that is not on this
        /// connection (Apple's store-and-forward collapse would have to remove it).
        var apnsStored = APNsStoredKnowledge.unknown

        mutating func hold(_ entry: InFlightDownstream, id: String) {
            if let replaced = inFlight.updateValue(entry, forKey: id), Self.counts(replaced) { heldNonCollapsible -= 1 }
            if Self.counts(entry) { heldNonCollapsible += 1 }
        }

        mutating func release(_ id: String) -> InFlightDownstream? {
            guard let entry = inFlight.removeValue(forKey: id) else { return nil }
            if Self.counts(entry) { heldNonCollapsible -= 1 }
            return entry
        }

        /// Offered by another node and known written since: its confirmation removes it here.
        mutating func markWritten(_ id: String) { inFlight[id]?.offeredBy = nil }

        private static func counts(_ e: InFlightDownstream) -> Bool {
            e.message.kind == .message && e.message.collapseKey == nil
        }

        /// After a confirmation: whether the window, having kept messages back, has emptied to half
        /// (one read refills it for many confirmations, not one read per confirmation). True marks
        /// the read as on its way.
        mutating func startsRefill(window: Int) -> Bool {
            guard heldBack, loaded, !refilling, inFlight.count <= window / 2 else { return false }
            refilling = true
            return true
        }
    }

    /// What this node knows of a connected device's stored APNs notifications (`Engine.needsCollapse`).
    enum APNsStoredKnowledge {
        /// Not yet: the queue as of connection time has not been read.
        case unknown
        /// The queue read at connection time held none, and none has been stored since.
        case holdsNone
        /// Some may be stored (read at connection, stored while connected): every newer one collapses.
        case mayHold
    }

    /// Confirmations remembered per connection (`OnlineDevice.confirmed`, `confirmedOffers`).
    static let confirmationsKept = 256

    struct Offered {
        let message: QueuedMessage
        let early: EarlyDelivery
        /// Confirmed after the writer took its write: removed once that commits.
        var confirmed = false
    }

    /// Device message id → token of the newest offered messages that were written unconfirmed. Enough
    /// for the confirmations of several seconds at the highest rate measured (about 20,000 messages a
    /// second across nodes): a confirmation comes within the live-write delay plus a round trip, or its
    /// device has left and confirms nothing.
    static let writtenOffersKept = 65_536
}
