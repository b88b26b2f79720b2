import StoreModel
import NIOCore
import PushDomain

/// What travels on a link between nodes (`NodeLinks`), after the hello: binary frames, because the
/// text of the NOTIFY payloads (JSON per message, split into lines) cost a tenth of a node's time to
/// write and read.
///
/// Every frame is a 4-byte big-endian length and then its content: a kind byte, and
/// - offers (1): the offering node's id, a count, and per message its fields in `QueuedMessage`'s
///   order (strings as a 4-byte length and UTF-8; optional strings after a presence byte; the three
///   times as 8-byte integers; the three flags in one byte);
/// - confirmations (2): a count and that many device message ids.
/// A frame that does not read back whole closes the link.
enum LinkFrames {
    enum Kind: UInt8 {
        case offers = 1
        case confirmations = 2
    }

    enum Decoded: Equatable {
        case offers(from: String, [QueuedMessage])
        case confirmations([String])
    }

    /// Appends one frame holding `messages` offered by `node`.
    static func writeOffers(_ messages: [QueuedMessage], from node: String, to buffer: inout ByteBuffer) {
        frame(&buffer) { b in
            b.writeInteger(Kind.offers.rawValue)
            write(node, &b)
            b.writeInteger(UInt32(messages.count))
            for m in messages {
                write(m.token, &b)
                write(m.deviceMessageID, &b)
                write(m.senderID, &b)
                write(m.appMessageID, &b)
                write(optional: m.collapseKey, &b)
                write(m.priority, &b)
                b.writeInteger(Int64(m.timeToLive))
                b.writeInteger(m.enqueuedAt)
                b.writeInteger(m.expiresAt)
                b.writeInteger(UInt8((m.deliveryReceiptRequested ? 1 : 0) | (m.delayWhileIdle ? 2 : 0) | (m.isNotification ? 4 : 0)))
                write(m.kind.rawValue, &b)
                write(m.payload, &b)
                write(optional: m.platformBlocks, &b)
            }
        }
    }

    /// Appends one frame holding these confirmations.
    static func writeConfirmations(_ ids: [String], to buffer: inout ByteBuffer) {
        frame(&buffer) { b in
            b.writeInteger(Kind.confirmations.rawValue)
            b.writeInteger(UInt32(ids.count))
            for id in ids { write(id, &b) }
        }
    }

    /// A frame's content (without its length), or nil if it is not one whole frame of a known kind.
    static func decode(_ content: ByteBuffer) -> Decoded? {
        var b = content
        guard let kind = b.readInteger(as: UInt8.self).flatMap(Kind.init(rawValue:)) else { return nil }
        let decoded: Decoded
        switch kind {
        case .offers:
            guard let node = readString(&b), let count = b.readInteger(as: UInt32.self),
                  Int(count) <= b.readableBytes else { return nil }
            var messages: [QueuedMessage] = []
            messages.reserveCapacity(Int(count))
            for _ in 0..<count {
                guard let token = readString(&b), let id = readString(&b), let sender = readString(&b),
                      let appID = readString(&b), let key = readOptional(&b), let priority = readString(&b),
                      let ttl = b.readInteger(as: Int64.self), let enqueued = b.readInteger(as: Int64.self),
                      let expires = b.readInteger(as: Int64.self), let flags = b.readInteger(as: UInt8.self),
                      let kind = readString(&b).flatMap(MessageKind.init(rawValue:)), let payload = readString(&b),
                      let blocks = readOptional(&b), let timeToLive = Int(exactly: ttl)
                else { return nil }
                messages.append(QueuedMessage(
                    token: token, deviceMessageID: id, senderID: sender, appMessageID: appID, collapseKey: key,
                    priority: priority, timeToLive: timeToLive, enqueuedAt: enqueued, expiresAt: expires,
                    deliveryReceiptRequested: flags & 1 != 0, delayWhileIdle: flags & 2 != 0,
                    isNotification: flags & 4 != 0, kind: kind, payload: payload, platformBlocks: blocks))
            }
            decoded = .offers(from: node, messages)
        case .confirmations:
            guard let count = b.readInteger(as: UInt32.self), Int(count) <= b.readableBytes else { return nil }
            var ids: [String] = []
            ids.reserveCapacity(Int(count))
            for _ in 0..<count {
                guard let id = readString(&b) else { return nil }
                ids.append(id)
            }
            decoded = .confirmations(ids)
        }
        return b.readableBytes == 0 ? decoded : nil
    }

    /// A text frame (the hello).
    static func frame(_ text: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 4 + text.utf8.count)
        buffer.writeInteger(UInt32(text.utf8.count))
        buffer.writeString(text)
        return buffer
    }

    private static func frame(_ buffer: inout ByteBuffer, _ body: (inout ByteBuffer) -> Void) {
        let lengthAt = buffer.writerIndex
        buffer.writeInteger(UInt32(0))
        body(&buffer)
        buffer.setInteger(UInt32(buffer.writerIndex - lengthAt - 4), at: lengthAt)
    }

    private static func write(_ s: String, _ b: inout ByteBuffer) {
        let lengthAt = b.writerIndex
        b.writeInteger(UInt32(0))
        let n = b.writeString(s)
        b.setInteger(UInt32(n), at: lengthAt)
    }

    private static func write(optional s: String?, _ b: inout ByteBuffer) {
        guard let s else {
            b.writeInteger(UInt8(0))
            return
        }
        b.writeInteger(UInt8(1))
        write(s, &b)
    }

    private static func readString(_ b: inout ByteBuffer) -> String? {
        guard let n = b.readInteger(as: UInt32.self) else { return nil }
        return b.readString(length: Int(n))
    }

    /// `.some(nil)` for an absent value, nil for a frame cut short.
    private static func readOptional(_ b: inout ByteBuffer) -> String?? {
        switch b.readInteger(as: UInt8.self) {
        case 0: return .some(nil)
        case 1: return readString(&b).map { .some($0) }
        default: return nil
        }
    }
}
