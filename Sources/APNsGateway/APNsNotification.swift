import PushDomain

/// One notification as a provider framed it, decoded and checked for form (not yet for its recipient).
public struct APNsNotification: Sendable, Equatable {
    public var command: APNsCommand
    /// The provider's 4 bytes, read big-endian (Apple's sample sent them in host order: they are
    /// echoed back as received either way). 0 for command 0 and for frames without item 3.
    public var identifier: UInt32
    /// UNIX seconds; 0 = deliver now or never. nil: command 0, which has none (stored like Apple did).
    public var expiry: UInt32?
    /// 10 or 5; commands 0 and 1 and frames without item 5 mean 10.
    public var priority: UInt8
    /// 32 bytes.
    public let deviceToken: [UInt8]
    /// The JSON object (with an `aps` object) exactly as sent.
    public var payload: [UInt8]
    /// `payload` parsed by the gateway: only when it cannot be passed on as it was sent
    /// (`JSONText.isEmbeddableObject`), and is then encoded anew for the device.
    public var parsedPayload: JSONValue?
    /// `payload`, parsed.
    public var payloadJSON: JSONValue {
        parsedPayload ?? (try? JSONValue.parse(String(decoding: payload, as: UTF8.self))) ?? .object([:])
    }
    /// The token as iOS shows it to the app: 64 lower-case hex digits (made once: the gateway's
    /// checks, the activity window and the target all name it).
    public let deviceTokenHex: String

    public init(command: APNsCommand, identifier: UInt32, expiry: UInt32?, priority: UInt8, deviceToken: [UInt8],
                payload: [UInt8], parsedPayload: JSONValue?) {
        self.command = command
        self.identifier = identifier
        self.expiry = expiry
        self.priority = priority
        self.deviceToken = deviceToken
        self.payload = payload
        self.parsedPayload = parsedPayload
        self.deviceTokenHex = Self.hex(deviceToken)
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// A notification the gateway refused: what the provider is told, and what is known of it.
public struct APNsRejection: Sendable, Equatable {
    public var status: APNsStatus
    /// The notification's identifier, or 0 when it was never read (Apple reported 0 then too).
    public var identifier: UInt32
    /// nil: the command byte was not one of 0, 1, 2.
    public var command: APNsCommand?
    /// The command byte as received.
    public var commandByte: UInt8
    public let deviceToken: [UInt8]
    /// Apple answered command 0 and unknown commands by closing, without an error response.
    public var sendsErrorResponse: Bool { command == .enhanced || command == .frame }

    public init(status: APNsStatus, identifier: UInt32, command: APNsCommand?, commandByte: UInt8, deviceToken: [UInt8] = []) {
        self.status = status
        self.identifier = identifier
        self.command = command
        self.commandByte = commandByte
        self.deviceToken = deviceToken
    }
}
