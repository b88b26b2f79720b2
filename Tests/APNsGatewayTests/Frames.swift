import NIOCore

/// Provider-side framing for the tests, written from spec apns-legacy §2 (not from the decoder).
enum Frames {
    static let token = [UInt8](repeating: 0xAB, count: 32)
    static let payload = Array(#"{"aps":{"alert":"Hello World!","badge":4,"sound":"default"}}"#.utf8)

    static func simple(token: [UInt8] = token, payload: [UInt8] = payload) -> [UInt8] {
        [0] + u16(token.count) + token + u16(payload.count) + payload
    }

    static func enhanced(id: UInt32, expiry: UInt32 = 0, token: [UInt8] = token, payload: [UInt8] = payload) -> [UInt8] {
        [1] + u32(id) + u32(expiry) + u16(token.count) + token + u16(payload.count) + payload
    }

    static func item(_ id: UInt8, _ data: [UInt8]) -> [UInt8] { [id] + u16(data.count) + data }

    static func frame(id: UInt32 = 1, expiry: UInt32 = 3600, priority: UInt8 = 10, token: [UInt8] = token,
                      payload: [UInt8] = payload) -> [UInt8] {
        frame(items: item(1, token) + item(2, payload) + item(3, u32(id)) + item(4, u32(expiry)) + item(5, [priority]))
    }

    static func frame(items: [UInt8]) -> [UInt8] { [2] + u32(items.count) + items }

    static func u16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func u32(_ v: some BinaryInteger) -> [UInt8] {
        let x = UInt32(truncatingIfNeeded: v)
        return [UInt8(x >> 24), UInt8(x >> 16 & 0xFF), UInt8(x >> 8 & 0xFF), UInt8(x & 0xFF)]
    }

    static func buffer(_ bytes: [UInt8]) -> ByteBuffer { ByteBuffer(bytes: bytes) }
}
