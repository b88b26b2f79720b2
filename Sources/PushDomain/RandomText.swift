/// Random identifiers (device ids and secrets, key ids, message ids) from the system's generator.
public enum RandomText {
    /// `count` characters drawn from `alphabet`.
    public static func of(_ alphabet: String, count: Int) -> String {
        let characters = Array(alphabet)
        var generator = SystemRandomNumberGenerator()
        return String((0..<count).map { _ in characters[Int(generator.next() % UInt64(characters.count))] })
    }

    /// `count` lowercase hexadecimal digits.
    public static func hex(_ count: Int) -> String { of("0123456789abcdef", count: count) }
}
