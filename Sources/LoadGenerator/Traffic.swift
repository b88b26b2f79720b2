import NIOCore

/// How a sender paces itself.
public enum SendMode: Sendable, Equatable {
    /// Keep the window full: maximum throughput.
    case closedLoop
    /// A fixed schedule of this many messages per second (for all senders together). Latency counts
    /// from the time a message was due, not when the window let it out, so a stalled server shows up in
    /// the latency figures instead of silently slowing the generator down (no coordinated omission).
    case openLoop(perSecond: Double)
}

/// What one sending connection sends: how many, how fast, how many may be unanswered.
struct SendPlan: Sendable {
    var mode: SendMode
    /// nil: until `RunControl.stop()`.
    var quota: Int?
    var window: Int
    /// This connection's share of an open-loop rate.
    var perSecond: Double
    /// Offset of this connection's schedule, so that senders do not fire in lockstep.
    var phase: Double

    /// When message `seq` is due (open loop), in monotonic nanoseconds.
    @inline(__always)
    func due(_ seq: UInt64, start: UInt64) -> UInt64 {
        start &+ UInt64(((Double(seq) + phase) / perSecond) * 1e9)
    }

    /// How many messages are due by `now` (open loop).
    @inline(__always)
    func dueCount(now: UInt64, start: UInt64) -> UInt64 {
        guard now >= start else { return 0 }
        let n = Double(now - start) / 1e9 * perSecond - phase
        return n < 0 ? 0 : UInt64(n) + 1
    }
}

/// The unanswered messages of one connection: send times by sequence number, in a ring that needs no
/// allocation after the start. A slot still taken blocks the sender (a message that long unanswered
/// means the server is stuck, and the window would have stopped it soon anyway).
struct PendingRing {
    private var sentAt: [UInt64]
    /// seq + 1 of the message in the slot; 0 when free.
    private var seqs: [UInt64]
    private let mask: Int
    private(set) var count = 0

    init(capacity: Int) {
        var size = 1
        while size < capacity * 4 { size <<= 1 }
        sentAt = Array(repeating: 0, count: size)
        seqs = Array(repeating: 0, count: size)
        mask = size - 1
    }

    @inline(__always)
    func isFree(_ seq: UInt64) -> Bool { seqs[Int(truncatingIfNeeded: seq) & mask] == 0 }

    @inline(__always)
    mutating func insert(_ seq: UInt64, at time: UInt64) {
        let slot = Int(truncatingIfNeeded: seq) & mask
        seqs[slot] = seq &+ 1
        sentAt[slot] = time
        count += 1
    }

    /// The send time of `seq` if it is pending; removes it.
    @inline(__always)
    mutating func remove(_ seq: UInt64) -> UInt64? {
        let slot = Int(truncatingIfNeeded: seq) & mask
        guard seqs[slot] == seq &+ 1 else { return nil }
        seqs[slot] = 0
        count -= 1
        return sentAt[slot]
    }
}

/// The registration tokens (or JIDs) messages go to, as bytes ready to copy into stanzas.
public final class Recipients: Sendable {
    let items: [[UInt8]]
    public init(_ items: [String]) { self.items = items.map { Array($0.utf8) } }
    public var count: Int { items.count }
}

/// The sending half shared by the CCS app server (downstream), the device (upstream) and the chat client:
/// sequence numbers, the window, pacing.
struct Sender {
    let plan: SendPlan
    let control: RunControl
    /// False when answers do not come back to the sender (XMPP chat: the receiver credits it instead).
    let tracksAnswers: Bool
    var ring: PendingRing
    var nextSeq: UInt64 = 0
    var stoppedByServer = false

    init(plan: SendPlan, control: RunControl, tracksAnswers: Bool = true) {
        self.plan = plan
        self.control = control
        self.tracksAnswers = tracksAnswers
        self.ring = PendingRing(capacity: max(plan.window, 1))
    }

    var finished: Bool {
        if let quota = plan.quota, nextSeq >= UInt64(quota) { return true }
        return stoppedByServer || control.stopped
    }

    /// Sends what the window and the schedule allow; `emit(seq, stamp)` writes one message.
    @inline(__always)
    mutating func pump(now: UInt64, recorder: LoopRecorder, unanswered: Int? = nil,
                       _ emit: (UInt64, UInt64) -> Void) {
        let start = control.started
        guard start != 0, !stoppedByServer, !control.stopped else { return }
        var limit = UInt64.max
        if let quota = plan.quota { limit = UInt64(quota) }
        if case .openLoop = plan.mode { limit = min(limit, plan.dueCount(now: now, start: start)) }
        var inFlight = unanswered ?? ring.count
        var sent = 0
        while nextSeq < limit && inFlight < plan.window && (!tracksAnswers || ring.isFree(nextSeq)) {
            let stamp: UInt64
            if case .openLoop = plan.mode { stamp = plan.due(nextSeq, start: start) } else { stamp = now }
            emit(nextSeq, stamp)
            if tracksAnswers { ring.insert(nextSeq, at: stamp) }
            nextSeq &+= 1
            inFlight += 1
            sent += 1
        }
        if sent > 0 { recorder.sent.add(sent, ordering: .relaxed) }
    }
}
