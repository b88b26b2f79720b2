/// Random identifiers (device ids and secrets, key ids, message ids) from the system's generator.
public enum RandomText {
    /// `count` characters drawn from `alphabet`.
    public static func of(_ alphabet: String, count: Int) -> String {
        let characters = Array(alphabet)
        var generator = SystemRandomNumberGenerator()
        return String((0..<count).map { _ in characters[Int(generator.next() % UInt64(characters.count))] })
    }

    /// `count` lowercase hexadecimal digits, sixteen from each 64 random bits (the HTTP APIs make
    /// one id per request; a draw per digit was a visible part of a v1 send's cost).
    /// Written straight into the string's storage (no array of digits or of bytes per call).
    public static func hex(_ count: Int) -> String {
        guard count > 0 else { return "" }
        var generator = SystemRandomNumberGenerator()
        return String(unsafeUninitializedCapacity: count) { out in
            var bits: UInt64 = 0
            for i in 0..<count {
                if i % 16 == 0 { bits = generator.next() }
                let digit = UInt8(truncatingIfNeeded: bits & 0xF)
                out[i] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
                bits >>= 4
            }
            return count
        }
    }
}
