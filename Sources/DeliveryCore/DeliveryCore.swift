import PushDomain
import StoreModel

/// The delivery core: who exists (the registry), which devices are connected and what each
/// connection holds (the sessions), topics, device groups, the rate limits and the collapsible
/// throttle, as one value. Its events are its methods (a send's look-up and submission, a commit's
/// hand-over, a backlog read, a device's confirmation, a connection up or down); each returns what
/// the host must do (`DeviceEffect`, `Submission`): writes, hand-overs to connections, reports.
///
/// It takes no lock, reads no clock (every time comes with its event), and reaches no connection,
/// store or callback: connections and cancellable writes are ids (`DeviceConnectionID`, `WriteID`)
/// whose objects the host keeps. The engine runs one per shard, each under its own lock, and performs the effects, the
/// writes in the order given (docs/architecture.md, "The delivery core").
package struct DeliveryCore {
    package struct Settings: Sendable {
        /// A device connection's window (`Engine.Configuration.deviceWindow`).
        package var deviceWindow: Int
        package var maxCollapseKeys: Int
        package var maxStoredNonCollapsible: Int
        /// On a shared store another node may write a device's queue (`needsCollapse` cannot know it).
        package var clustered: Bool
        /// The device message ids this node may mint.
        package var messageIDSlot: MessageIDSlot

        package init(deviceWindow: Int, maxCollapseKeys: Int, maxStoredNonCollapsible: Int, clustered: Bool = false,
                     messageIDSlot: MessageIDSlot = .whole) {
            self.deviceWindow = deviceWindow
            self.maxCollapseKeys = maxCollapseKeys
            self.maxStoredNonCollapsible = maxStoredNonCollapsible
            self.clustered = clustered
            self.messageIDSlot = messageIDSlot
        }
    }

    package let settings: Settings
    /// Who exists: senders, device registrations and each device's state.
    package var registry = Registry()
    /// Which devices are connected, what each holds unconfirmed, what other nodes offered.
    package var sessions = DeviceSessions()
    package var topics = TopicRegistry()
    package var groups = DeviceGroupRegistry()
    /// Messages counted against each device's rate limit (nil: `--device-message-rate` is off).
    package var deviceRates: RateLimiter?
    /// The collapsible messages held back per device (`--collapsible-throttle`).
    package var throttle: CollapsibleThrottle?
    /// Messages counted against each sender's topics (nil: `--topic-message-rate` is off).
    package var topicRates: RateLimiter?
    /// The newest message timestamp given out (`nextMicros`): ids stay ordered when the clock is not.
    package private(set) var lastMicros: Int64 = 0

    package init(settings: Settings, deviceRate: MessageRate? = nil, topicRate: MessageRate? = nil,
                 throttle: CollapsibleThrottleRate? = nil, lastMicros: Int64 = 0) {
        self.settings = settings
        deviceRates = deviceRate.map(RateLimiter.init(rate:))
        topicRates = topicRate.map(RateLimiter.init(rate:))
        self.throttle = throttle.map(CollapsibleThrottle.init(rate:))
        self.lastMicros = lastMicros
    }

    /// A new message's timestamp (`now`: the clock's microseconds), after every one given out.
    package mutating func nextMicros(now: Int64) -> Int64 {
        lastMicros = settings.messageIDSlot.next(after: lastMicros, now: now)
        return lastMicros
    }
}

/// What the host does for the core on a device's side.
package enum DeviceEffect: Equatable {
    /// Give these messages to the connection (rendered for its platform and app state on the way out).
    case deliver(DeviceConnectionID, [DeviceDelivery], Platform, app: String, appInBackground: Bool)
    /// Write these (removals the hand-over found due), after every write asked for before.
    case write([StoreOp])
    /// The throttle held this collapsible message back (journaled with `detail`).
    case throttled(QueuedMessage, detail: String)
    /// Read the device's queue for this connection, after every write asked for before (the answer
    /// is `backlogRead`, or `backlogReadFailed`).
    case readBacklog(token: String, DeviceConnectionID)
    /// The connection left the sessions: close it (`close`), or it is closed already; either way the
    /// host forgets it and the early writes it held (their commits still answer).
    case release(DeviceConnectionID, writes: [WriteID], close: Bool)
}
