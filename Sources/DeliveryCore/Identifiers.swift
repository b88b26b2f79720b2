/// One device connection, as the core knows it: the host (`Engine`) keeps the connection itself.
package struct DeviceConnectionID: Hashable, Sendable, CustomStringConvertible {
    package let raw: UInt

    package init(_ raw: UInt) { self.raw = raw }

    package var description: String { "device-connection-\(raw)" }
}

/// A write the core asked for that may still be called off (a message handed over before its write
/// committed). The host keeps the write's ticket and the answer it owes under this id.
package struct WriteID: Hashable, Sendable, CustomStringConvertible {
    package let raw: UInt64

    package init(_ raw: UInt64) { self.raw = raw }

    package var description: String { "write-\(raw)" }
}
