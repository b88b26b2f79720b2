import DeliveryCore
import PushDomain
import DequeModule
import Locking

/// What the APNs gateway did, for the admin API: every notification it accepted or rejected (with the
/// status it answered) and every one a device confirmed. Kept in memory only, the newest
/// `capacity` entries: it is a window for tests and people watching, not a record of state.
public final class APNsActivity: Sendable {
    public enum Event: String, Sendable, CaseIterable {
        /// The gateway took the notification (no answer on the wire).
        case accepted
        /// The gateway answered it with an error response (or, for command 0, closed).
        case rejected
        /// The device confirmed it.
        case delivered
        /// Its app was uninstalled: a feedback tuple was recorded instead.
        case feedback

        var index: Int {
            switch self {
            case .accepted: 0
            case .rejected: 1
            case .delivered: 2
            case .feedback: 3
            }
        }
    }

    public struct Entry: Sendable, Equatable {
        public var sequence: Int64
        public var at: Int64
        public var event: Event
        public var bundleID: String
        /// 64 hex digits; what the provider sent when it was not 32 bytes (hex of those bytes).
        public var deviceToken: String
        public var identifier: UInt32
        /// 0, 1 or 2 (nil for a delivery: the device does not know it).
        public var command: UInt8?
        /// The error-response status (rejected only).
        public var status: UInt8?
        public var priority: UInt8?
        public var expiry: UInt32?
        /// The payload as the provider sent it (accepted notifications): kept as bytes, parsed when the
        /// admin API reads it (a parsed value per entry made every notification build, and later free,
        /// a tree of dictionaries).
        public var payloadBytes: [UInt8]?
        public var payload: JSONValue? {
            payloadBytes.flatMap { try? JSONValue.parse(String(decoding: $0, as: UTF8.self)) }
        }

        public init(event: Event, at: Int64, bundleID: String, deviceToken: String, identifier: UInt32,
                    command: UInt8? = nil, status: UInt8? = nil, priority: UInt8? = nil, expiry: UInt32? = nil,
                    payload: [UInt8]? = nil) {
            self.sequence = 0
            self.at = at
            self.event = event
            self.bundleID = bundleID
            self.deviceToken = deviceToken
            self.identifier = identifier
            self.command = command
            self.status = status
            self.priority = priority
            self.expiry = expiry
            self.payloadBytes = payload
        }
    }

    public let capacity: Int
    /// A deque: dropping the oldest of a full window is O(1) (an array's removeFirst moved all 10,000
    /// entries on every notification once the window was full).
    /// Counts per event in a fixed array (indexed by `Event.allCases`): a dictionary keyed by the
    /// event hashed it twice per notification.
    private let state: Locked<(entries: Deque<Entry>, next: Int64, counts: [Int64])>

    public init(capacity: Int = 10_000) {
        self.capacity = max(1, capacity)
        state = Locked(([], 1, Array(repeating: 0, count: Event.allCases.count)))
    }

    public func record(_ entry: Entry) {
        state.withLock { s in
            var e = entry
            e.sequence = s.next
            s.next += 1
            s.counts[e.event.index] += 1
            if s.entries.count >= capacity { s.entries.removeFirst() }
            s.entries.append(e)
        }
    }

    /// The kept entries after `sequence`, oldest first, optionally of one event and one bundle id.
    public func entries(after sequence: Int64 = 0, event: Event? = nil, bundleID: String? = nil, limit: Int = 1000) -> [Entry] {
        state.withLock { s in
            var out: [Entry] = []
            for e in s.entries where e.sequence > sequence && (event == nil || e.event == event)
                && (bundleID == nil || e.bundleID == bundleID) {
                out.append(e)
                if out.count >= limit { break }
            }
            return out
        }
    }

    /// How many of each event happened since start (not only the kept ones).
    public var counts: [Event: Int64] {
        let counts = state.withLock { $0.counts }
        var out: [Event: Int64] = [:]
        for event in Event.allCases where counts[event.index] > 0 { out[event] = counts[event.index] }
        return out
    }
}
