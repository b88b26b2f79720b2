import NIOCore

extension ByteBuffer {
    /// Decimal digits without going through `String`.
    @inline(__always)
    @discardableResult
    public mutating func writeDecimal(_ value: UInt64) -> Int {
        var digits = 1
        var v = value
        while v >= 10 { v /= 10; digits += 1 }
        let written = writeWithUnsafeMutableBytes(minimumWritableBytes: digits) { out in
            var v = value
            var i = digits - 1
            while true {
                out[i] = UInt8(48 + v % 10)
                v /= 10
                if i == 0 { break }
                i -= 1
            }
            return digits
        }
        return written
    }

    @inline(__always)
    @discardableResult
    public mutating func writeDecimal(_ value: Int) -> Int {
        writeDecimal(UInt64(value))
    }
}
