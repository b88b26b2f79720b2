import NIOCore

/// The feedback service's record: `|time:4|token_len:2|token|` (38 bytes for a 32-byte token).
public struct FeedbackTuple: Sendable, Equatable {
    /// UNIX seconds (UTC).
    public var timestamp: UInt32
    public var deviceToken: [UInt8]

    public init(timestamp: UInt32, deviceToken: [UInt8]) {
        self.timestamp = timestamp
        self.deviceToken = deviceToken
    }

    /// From 64 hex digits; nil if they are not.
    public init?(timestamp: Int64, deviceTokenHex: String) {
        let utf8 = Array(deviceTokenHex.utf8)
        guard utf8.count % 2 == 0, utf8.count / 2 <= Int(UInt16.max) else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        var i = 0
        while i < utf8.count {
            guard let hi = Self.nibble(utf8[i]), let lo = Self.nibble(utf8[i + 1]) else { return nil }
            bytes.append(hi << 4 | lo)
            i += 2
        }
        self.timestamp = UInt32(clamping: timestamp)
        deviceToken = bytes
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 97...102: return c - 87
        case 65...70: return c - 55
        default: return nil
        }
    }

    public func write(to buffer: inout ByteBuffer) {
        buffer.writeInteger(timestamp)
        buffer.writeInteger(UInt16(deviceToken.count))
        buffer.writeBytes(deviceToken)
    }
}
