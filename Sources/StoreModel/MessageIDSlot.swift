/// Which device message ids (`0:<micros>%…`) a node may mint. The nodes of one cluster each hold a
/// slot of their own, and the microseconds of every id a node mints leave its slot as the remainder
/// modulo `count`: two live nodes never mint the same id, on the wall clock or on a virtual clock
/// that stands still (docs/scaling.md). A node alone holds every microsecond (`whole`).
public struct MessageIDSlot: Sendable, Equatable {
    /// Slots on one database: at most this many live nodes. At 32, a node mints 31,250 ids a second
    /// before its ids' microseconds run ahead of its clock (they catch up when it is quieter).
    public static let count = 32
    /// A node alone: every microsecond is its own.
    public static let whole = MessageIDSlot(slot: 0, of: 1)

    public let slot: Int64
    public let modulus: Int64

    public init(slot: Int, of modulus: Int) {
        precondition(modulus > 0 && (0..<modulus).contains(slot), "slot \(slot) of \(modulus)")
        self.slot = Int64(slot)
        self.modulus = Int64(modulus)
    }

    /// The first stamp in this slot that is after `last` and not before `now`: ids stay ordered
    /// when the clock is not (`now` behind, or standing still).
    public func next(after last: Int64, now: Int64) -> Int64 {
        let floor = max(now, last + 1)
        let remainder = ((floor % modulus) + modulus) % modulus
        return floor + (slot - remainder + modulus) % modulus
    }
}

extension MessageIDSlot {
    /// One of `count` shards' part of this slot: stamps still in this slot (so nodes stay apart
    /// whatever their shard counts), and apart from the node's other shards.
    public func shard(_ index: Int, of count: Int) -> MessageIDSlot {
        precondition(count > 0 && (0..<count).contains(index), "shard \(index) of \(count)")
        return MessageIDSlot(slot: Int(slot + modulus * Int64(index)), of: Int(modulus) * count)
    }
}
