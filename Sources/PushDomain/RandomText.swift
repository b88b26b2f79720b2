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
    public static func hex(_ count: Int) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8]()
        bytes.reserveCapacity(count)
        var bits: UInt64 = 0
        for i in 0..<count {
            if i % 16 == 0 { bits = generator.next() }
            bytes.append(digits[Int(bits & 0xF)])
            bits >>= 4
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
