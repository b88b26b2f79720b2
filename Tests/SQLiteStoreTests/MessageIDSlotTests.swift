import StoreModel
import Testing

/// Device message ids of the nodes of one cluster never collide (issue 39, item 4): each node mints
/// in its own slot, ordered, on a clock that runs, stands still or goes back.
@Suite struct MessageIDSlotTests {
    @Test func eachSlotMintsOrderedStampsOfItsOwnRemainder() {
        let slots = (0..<3).map { MessageIDSlot(slot: $0, of: 3) }
        var last = [Int64](repeating: 0, count: 3)
        var minted: [Set<Int64>] = [[], [], []]
        // A clock that stands still, then runs, then goes back.
        for now in [Int64](repeating: 1_000, count: 5) + [1_001, 1_002, 2_000, 1_500] {
            for (i, slot) in slots.enumerated() {
                let next = slot.next(after: last[i], now: now)
                #expect(next > last[i] && next >= now && next % 3 == Int64(i))
                last[i] = next
                minted[i].insert(next)
            }
        }
        #expect(minted[0].isDisjoint(with: minted[1]) && minted[1].isDisjoint(with: minted[2]))
        // Alone, a node takes the next microsecond, as before.
        #expect(MessageIDSlot.whole.next(after: 41, now: 7) == 42)
        #expect(MessageIDSlot.whole.next(after: 41, now: 50) == 50)
    }
}

/// A node's shards each mint in their own part of the node's slot: apart from each other, and still
/// in the node's slot whatever the shard count, so that nodes with different counts stay apart.
@Suite struct MessageIDShardTests {
    @Test func shardsMintApartAndInTheirNodesSlot() {
        for (node, shards) in [(MessageIDSlot.whole, 3), (MessageIDSlot(slot: 5, of: 32), 4), (MessageIDSlot(slot: 5, of: 32), 1)] {
            var minted: [Set<Int64>] = Array(repeating: [], count: shards)
            for index in 0..<shards {
                let slot = node.shard(index, of: shards)
                var last: Int64 = 0
                for now in [Int64](repeating: 10_000, count: 4) + [10_001, 20_000, 15_000] {
                    let next = slot.next(after: last, now: now)
                    #expect(next > last && next >= now && next % node.modulus == node.slot)
                    last = next
                    minted[index].insert(next)
                }
            }
            for a in 0..<shards {
                for b in 0..<shards where a < b { #expect(minted[a].isDisjoint(with: minted[b])) }
            }
        }
        #expect(MessageIDSlot.whole.shard(0, of: 1) == .whole)
    }
}
