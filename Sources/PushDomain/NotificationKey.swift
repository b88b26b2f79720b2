/// Device-group notification keys: `APA91b` followed by 80 base64url characters, like the keys FCM
/// handed out (seed 004: `"notification_key": "APA91bGHXQBB...9QgnYOEURwm0I3lmyqzk2TXQ"`).
///
/// A key is an encoding of the group's id, not a stored string: FCM answered each lookup of the same
/// group with a different string, every one of them a valid key (seed 004, "retrieving a notification
/// key"). So a key carries a random nonce, the id masked with a stream drawn from that nonce, and a
/// check value; any encoding decodes to the same id, and a string that is not one (a registration
/// token, a typo) decodes to nothing. This is obfuscation, not secrecy: groups are protected by
/// belonging to one sender, never by the key being hard to forge.
public enum NotificationKey {
    public static let prefix = "APA91b"
    static let version: UInt8 = 1
    static let nonceLength = 20
    static let idLength = 16
    static let checkLength = 23
    /// 60 bytes: 80 base64url characters without padding.
    static let byteLength = 1 + nonceLength + idLength + checkLength
    public static let length = prefix.utf8.count + byteLength / 3 * 4

    /// A fresh encoding of the group id (32 lowercase hex digits).
    public static func make(groupID: String) -> String {
        var generator = SystemRandomNumberGenerator()
        return make(groupID: groupID, nonce: (0..<nonceLength).map { _ in UInt8.random(in: 0 ... .max, using: &generator) })
    }

    static func make(groupID: String, nonce: [UInt8]) -> String {
        let id = hexBytes(groupID) ?? [UInt8](repeating: 0, count: idLength)
        let mask = stream(seed: fnv1a(nonce), count: idLength)
        var bytes: [UInt8] = [version]
        bytes += nonce
        bytes += zip(id, mask).map { $0 ^ $1 }
        bytes += check(id: id, nonce: nonce)
        return prefix + base64URL(bytes)
    }

    /// The group id a key encodes, or nil when `key` is not a notification key of this emulator.
    public static func groupID(of key: String) -> String? {
        guard key.utf8.count == length, key.hasPrefix(prefix),
              let bytes = decodeBase64URL(key.utf8.dropFirst(prefix.utf8.count)), bytes.count == byteLength,
              bytes[0] == version else { return nil }
        let nonce = Array(bytes[1 ..< 1 + nonceLength])
        let masked = bytes[1 + nonceLength ..< 1 + nonceLength + idLength]
        let mask = stream(seed: fnv1a(nonce), count: idLength)
        let id = zip(masked, mask).map { $0 ^ $1 }
        guard Array(bytes[(1 + nonceLength + idLength)...]) == check(id: id, nonce: nonce) else { return nil }
        return id.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }

    /// 32 random hex digits: a new group's id.
    public static func newGroupID() -> String { RandomText.hex(idLength * 2) }

    private static func check(id: [UInt8], nonce: [UInt8]) -> [UInt8] {
        stream(seed: fnv1a(id + nonce + Array("ccs-emulator device group".utf8)), count: checkLength)
    }

    /// SplitMix64 output as bytes: a fixed, portable stream (Swift's Hasher is seeded per process,
    /// and a key must decode the same after a restart).
    private static func stream(seed: UInt64, count: Int) -> [UInt8] {
        var random = SplitMix64(seed: seed)
        var out: [UInt8] = []
        out.reserveCapacity(count + 8)
        while out.count < count {
            let z = random.next()
            for shift in stride(from: 0, to: 64, by: 8) { out.append(UInt8(truncatingIfNeeded: z >> UInt64(shift))) }
        }
        return Array(out.prefix(count))
    }

    private static func fnv1a(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for b in bytes { hash = (hash ^ UInt64(b)) &* 0x0000_0100_0000_01B3 }
        return hash
    }

    private static func hexBytes(_ hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count == idLength * 2 else { return nil }
        var out: [UInt8] = []
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let hi = hexValue(digits[i]), let lo = hexValue(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
        }
        return out
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        default: return nil
        }
    }

    private static func base64URL(_ bytes: [UInt8]) -> String {
        let alphabet = RegistrationToken.alphabet
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count / 3 * 4)
        for i in stride(from: 0, to: bytes.count - bytes.count % 3, by: 3) {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            for shift in [18, 12, 6, 0] { out.append(alphabet[Int(n >> UInt32(shift) & 63)]) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whole groups of four characters only (keys are made of 60 bytes: no padding, no remainder).
    private static func decodeBase64URL(_ text: Substring.UTF8View) -> [UInt8]? {
        let chars = Array(text)
        guard chars.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 4 * 3)
        for i in stride(from: 0, to: chars.count, by: 4) {
            var n: UInt32 = 0
            for c in chars[i ..< i + 4] {
                guard let v = sextet(c) else { return nil }
                n = n << 6 | UInt32(v)
            }
            out += [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
        }
        return out
    }

    private static func sextet(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return nil
        }
    }
}

private extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
