/// The id a device sees on a delivered message, in FCM's form
/// `0:1587579700287156%a62f20e7a62f20e7`: "0:", microseconds, "%", then the 8 hex digits
/// of a per-sender hash written twice.
public enum DeviceMessageID {
    /// `0:<micros>%<hash as 8 hex digits, twice>`, built in one stack buffer (it is made per message).
    public static func make(micros: Int64, senderHash: UInt32) -> String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 48) { buffer in
            buffer[0] = UInt8(ascii: "0")
            buffer[1] = UInt8(ascii: ":")
            // Decimal digits of micros (at most 19), written backwards from index 21, then moved.
            var value = UInt64(max(0, micros))
            var start = 21
            repeat {
                start -= 1
                buffer[start] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
            } while value > 0
            var n = 2
            for i in start..<21 {
                buffer[n] = buffer[i]
                n += 1
            }
            buffer[n] = UInt8(ascii: "%")
            n += 1
            for _ in 0..<2 {
                for shift in stride(from: 28, through: 0, by: -4) {
                    buffer[n] = hexDigits[Int((senderHash >> UInt32(shift)) & 0xF)]
                    n += 1
                }
            }
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[0..<n]), as: UTF8.self)
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// A stable 32-bit hash of a sender ID (FNV-1a), for `make(micros:senderHash:)`.
    public static func senderHash(_ senderID: String) -> UInt32 {
        var hash: UInt32 = 0x811C_9DC5
        for byte in senderID.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        return hash
    }

    /// Shape check: `0:<digits>%<16 lower-case hex digits, both halves equal>`.
    public static func looksValid(_ id: String) -> Bool {
        guard id.hasPrefix("0:") else { return false }
        let rest = id.dropFirst(2)
        guard let percent = rest.firstIndex(of: "%") else { return false }
        let micros = rest[..<percent]
        let hash = rest[rest.index(after: percent)...]
        guard !micros.isEmpty, micros.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              hash.utf8.count == 16,
              hash.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
        else { return false }
        return hash.prefix(8) == hash.suffix(8)
    }
}

/// FCM registration tokens: `<instance id>:APA91b<134 base64url characters>` (163 characters
/// with a 22-character instance id), unguessable because they come from the system CSPRNG.
public enum RegistrationToken {
    public static let marker = "APA91b"
    public static let randomPartLength = 134
    public static let instanceIDLength = 22

    static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func make(instanceID: String) -> String {
        "\(instanceID):\(marker)\(randomBase64URL(count: randomPartLength))"
    }

    /// 22 random base64url characters.
    /// Like a Firebase installation ID: the first four bits are 0111, so it starts with c, d, e or f
    /// (never with "-", which command lines would take for an option).
    public static func makeInstanceID() -> String {
        var g = SystemRandomNumberGenerator()
        return String("cdef".randomElement(using: &g)!) + randomBase64URL(count: instanceIDLength - 1)
    }

    /// The instance id part of an FCM-style token, if it has one.
    public static func instanceID(of token: String) -> String? {
        guard let colon = token.firstIndex(of: ":") else { return nil }
        return String(token[..<colon])
    }

    /// Shape check only (the engine decides whether a token is registered):
    /// `[<1-255 base64url chars>:]APA91b<at least 10 base64url chars>`, at most 4096 bytes.
    /// Accepts this emulator's tokens, real FCM tokens and old GCM registration ids.
    public static func looksValid(_ token: String) -> Bool {
        let bytes = token.utf8
        guard bytes.count <= 4096 else { return false }
        var rest = Substring(token)
        if let colon = token.firstIndex(of: ":") {
            let instance = token[..<colon]
            guard (1...255).contains(instance.utf8.count), instance.utf8.allSatisfy(isBase64URL) else { return false }
            rest = token[token.index(after: colon)...]
        }
        guard rest.hasPrefix(marker) else { return false }
        let random = rest.dropFirst(marker.count)
        return random.utf8.count >= 10 && random.utf8.allSatisfy(isBase64URL)
    }

    static func isBase64URL(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }

    static func randomBase64URL(count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        while bytes.count < count {
            var bits = generator.next()
            // Ten 6-bit symbols per 64-bit draw.
            for _ in 0..<10 where bytes.count < count {
                bytes.append(alphabet[Int(bits & 0x3F)])
                bits >>= 6
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
