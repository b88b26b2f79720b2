import PushDomain
import Testing

/// `RandomText.hex` writes its digits straight into the string: the length asked for, lowercase
/// hexadecimal only, every digit reachable, and not the same twice.
@Suite struct RandomTextTests {
    @Test func hexHasTheLengthAndTheAlphabet() {
        #expect(RandomText.hex(0).isEmpty)
        for count in [1, 15, 16, 17, 32, 40, 64] {
            let text = RandomText.hex(count)
            #expect(text.utf8.count == count)
            #expect(text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) })
        }
        var seen = Set<Character>()
        for _ in 0..<64 { seen.formUnion(RandomText.hex(64)) }
        #expect(seen == Set("0123456789abcdef"))
        #expect(RandomText.hex(32) != RandomText.hex(32))
    }
}
