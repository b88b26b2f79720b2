/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and the same sequence on every platform, which
/// is what a reproducible run needs (the standard library's generator is not seedable): a fault
/// rule's seeded draws, a notification key's check bytes (they must decode the same after a
/// restart), and the tests' seeded sequences.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    public mutating func nextUnit() -> Double {
        Double(next() >> 11) * (1.0 / 9_007_199_254_740_992.0)
    }
}
