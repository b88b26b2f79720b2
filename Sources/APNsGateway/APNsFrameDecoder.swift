import NIOCore
import PushDomain

/// Turns the bytes of a gateway connection into notifications, in whatever pieces they arrive: a
/// notification split across reads waits for its rest; many in one read come out one by one.
/// It checks each notification's form (spec apns-legacy §2–3) and reports the first bad one with
/// its status; it never buffers more than one notification (a command-2 frame is bounded).
public struct APNsFrameDecoder: Sendable {
    /// The device token size Apple's binary interface took.
    public static let tokenSize = 32
    /// The longest frame that can be well formed: five items of at most 65,535 bytes each. A longer
    /// announced length cannot be a notification; waiting for it would only buffer garbage.
    public static let maximumFrameLength = 5 * (3 + Int(UInt16.max))

    public enum Outcome: Sendable, Equatable {
        case notification(APNsNotification)
        case rejected(APNsRejection)
    }

    /// Payload bytes allowed (2048; 256 before iOS 8).
    public let payloadLimit: Int
    private var buffer = ByteBuffer()

    public init(payloadLimit: Int = 2048) {
        self.payloadLimit = payloadLimit
    }

    public mutating func append(_ bytes: ByteBuffer) {
        if buffer.readableBytes == 0 {
            buffer = bytes
        } else {
            var bytes = bytes
            buffer.writeBuffer(&bytes)
        }
    }

    /// Bytes received and not yet part of a decoded notification.
    public var buffered: Int { buffer.readableBytes }

    /// The next complete notification (or the rejection of it), nil until more bytes arrive.
    public mutating func next() -> Outcome? {
        guard let commandByte = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return nil }
        guard let command = APNsCommand(rawValue: commandByte) else {
            return .rejected(APNsRejection(status: .protocolError, identifier: 0, command: nil, commandByte: commandByte))
        }
        let outcome: Outcome?
        switch command {
        case .simple: outcome = nextLegacy(command, headerLength: 1)
        case .enhanced: outcome = nextLegacy(command, headerLength: 9)
        case .frame: outcome = nextFrame()
        }
        if buffer.readableBytes == 0 { buffer.clear() } else if buffer.readerIndex > 65_536 { buffer.discardReadBytes() }
        return outcome
    }

    /// Commands 0 and 1: `|cmd|[id:4|expiry:4]|token_len:2|token|payload_len:2|payload|`.
    private mutating func nextLegacy(_ command: APNsCommand, headerLength: Int) -> Outcome? {
        let start = buffer.readerIndex
        guard let tokenLength = buffer.getInteger(at: start + headerLength, as: UInt16.self) else { return nil }
        let payloadLengthAt = start + headerLength + 2 + Int(tokenLength)
        guard let payloadLength = buffer.getInteger(at: payloadLengthAt, as: UInt16.self) else { return nil }
        let total = headerLength + 2 + Int(tokenLength) + 2 + Int(payloadLength)
        guard buffer.readableBytes >= total else { return nil }
        var identifier: UInt32 = 0
        var expiry: UInt32?
        if command == .enhanced {
            identifier = buffer.getInteger(at: start + 1, as: UInt32.self)!
            expiry = buffer.getInteger(at: start + 5, as: UInt32.self)!
        }
        let token = buffer.getBytes(at: start + headerLength + 2, length: Int(tokenLength))!
        let payload = buffer.getBytes(at: payloadLengthAt + 2, length: Int(payloadLength))!
        buffer.moveReaderIndex(forwardBy: total)  // after the reads: get-methods see only readable bytes
        return validated(command: command, identifier: identifier, expiry: expiry, priority: 10,
                         token: token, payload: payload)
    }

    /// Command 2: `|2|frame_len:4|items…|`, each item `|id:1|len:2|data|`.
    private mutating func nextFrame() -> Outcome? {
        let start = buffer.readerIndex
        guard let frameLength = buffer.getInteger(at: start + 1, as: UInt32.self) else { return nil }
        guard frameLength <= Self.maximumFrameLength else {
            return .rejected(APNsRejection(status: .protocolError, identifier: 0, command: .frame, commandByte: 2))
        }
        let total = 5 + Int(frameLength)
        guard buffer.readableBytes >= total else { return nil }
        // Get-methods see only the readable bytes: the frame is sliced off before the reader moves on.
        let frame = buffer.getSlice(at: start + 5, length: Int(frameLength))!
        buffer.moveReaderIndex(forwardBy: total)

        var token: [UInt8]?, payload: [UInt8]?, identifier: UInt32?, expiry: UInt32?, priority: UInt8?
        var malformed: APNsStatus?
        var at = frame.readerIndex
        let end = frame.writerIndex
        while at < end {
            guard at + 3 <= end, let id = frame.getInteger(at: at, as: UInt8.self),
                  let length = frame.getInteger(at: at + 1, as: UInt16.self), at + 3 + Int(length) <= end else {
                malformed = malformed ?? .protocolError
                break
            }
            let data = at + 3
            at = data + Int(length)
            switch id {
            case 1 where token == nil: token = frame.getBytes(at: data, length: Int(length))
            case 2 where payload == nil: payload = frame.getBytes(at: data, length: Int(length))
            case 3 where identifier == nil && length == 4: identifier = frame.getInteger(at: data, as: UInt32.self)
            case 4 where expiry == nil && length == 4: expiry = frame.getInteger(at: data, as: UInt32.self)
            case 5 where priority == nil && length == 1: priority = frame.getInteger(at: data, as: UInt8.self)
            default: malformed = malformed ?? .unknown  // unknown, duplicate, or of the wrong size
            }
        }
        // The identifier is reported whenever it could be read, even for a frame bad elsewhere.
        if let malformed {
            return .rejected(APNsRejection(status: malformed, identifier: identifier ?? 0, command: .frame,
                                           commandByte: 2, deviceToken: token ?? []))
        }
        if let priority, priority != 5 && priority != 10 {
            return .rejected(APNsRejection(status: .unknown, identifier: identifier ?? 0, command: .frame,
                                           commandByte: 2, deviceToken: token ?? []))
        }
        // Apple let expiry and priority be left out; they then mean "now or never" and 10.
        return validated(command: .frame, identifier: identifier ?? 0, expiry: expiry ?? 0, priority: priority ?? 10,
                         token: token ?? [], payload: payload ?? [])
    }

    private func validated(command: APNsCommand, identifier: UInt32, expiry: UInt32?, priority: UInt8,
                           token: [UInt8], payload: [UInt8]) -> Outcome {
        func reject(_ status: APNsStatus) -> Outcome {
            .rejected(APNsRejection(status: status, identifier: identifier, command: command,
                                    commandByte: command.rawValue, deviceToken: token))
        }
        if token.isEmpty { return reject(.missingDeviceToken) }
        if token.count != Self.tokenSize { return reject(.invalidTokenSize) }
        if payload.isEmpty { return reject(.missingPayload) }
        if payload.count > payloadLimit { return reject(.invalidPayloadSize) }
        // Not a JSON object with an `aps` object: there is no notification to show (status 4 is this
        // emulator's choice; Apple's answer to such a payload is not on record, docs/apns.md).
        // Most payloads are checked without being parsed, and go to the device as they were sent.
        var parsed: JSONValue? = nil
        if !JSONText.isEmbeddableObject(payload, withObjectAt: "aps") {
            guard let json = try? JSONValue.parse(String(decoding: payload, as: UTF8.self)),
                  json["aps"]?.objectValue != nil else { return reject(.missingPayload) }
            parsed = json
        }
        return .notification(APNsNotification(command: command, identifier: identifier, expiry: expiry,
                                              priority: priority, deviceToken: token, payload: payload,
                                              parsedPayload: parsed))
    }
}
