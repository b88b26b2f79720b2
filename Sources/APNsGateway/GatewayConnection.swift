import NIOCore

/// One gateway connection as Apple ran it: notifications are taken silently until the first bad one,
/// which is answered with an error response (commands 1 and 2) or none (command 0, unknown commands);
/// then the connection closes and whatever followed on it is dropped unread, for the provider to
/// send again. Sans-I/O: bytes in, a `Step` out.
public struct GatewayConnection: Sendable {
    /// What the provider certificate says the connection may push to.
    public enum Topic: Sendable, Equatable {
        case bundleID(String)
        /// No subject UID: every notification is refused with status 3.
        case missing
        /// An empty or over-long UID: status 6.
        case invalidSize
    }

    /// What the handler does with one read.
    public struct Step: Sendable, Equatable {
        /// Notifications to hand to the engine, in order.
        public var accepted: [APNsNotification] = []
        /// The first bad notification; the handler writes its error response (if any) and closes.
        public var rejection: APNsRejection?
        /// Bytes that arrived after the rejection, dropped unread.
        public var droppedBytes = 0

        public var closes: Bool { rejection != nil }
    }

    public let topic: Topic
    private var decoder: APNsFrameDecoder
    private var closed = false
    /// The identifier of the last notification taken (status 10 reports it).
    public private(set) var lastIdentifier: UInt32 = 0

    public init(topic: Topic, payloadLimit: Int = 2048) {
        self.topic = topic
        decoder = APNsFrameDecoder(payloadLimit: payloadLimit)
    }

    /// Bytes from the provider. `recipient` says whether the bundle id may push to a well-formed
    /// notification's token: nil if so, else the status (8).
    public mutating func received(_ bytes: ByteBuffer, recipient: (APNsNotification, String) -> APNsStatus?) -> Step {
        var step = Step()
        guard !closed else {
            step.droppedBytes = bytes.readableBytes
            return step
        }
        decoder.append(bytes)
        while let outcome = decoder.next() {
            switch outcome {
            case .rejected(let rejection):
                return close(step, rejection)
            case .notification(let n):
                let status: APNsStatus?
                switch topic {
                case .missing: status = .missingTopic
                case .invalidSize: status = .invalidTopicSize
                case .bundleID(let bundleID): status = recipient(n, bundleID)
                }
                if let status {
                    return close(step, APNsRejection(status: status, identifier: n.identifier, command: n.command,
                                                     commandByte: n.command.rawValue, deviceToken: n.deviceToken))
                }
                lastIdentifier = n.identifier
                step.accepted.append(n)
            }
        }
        return step
    }

    private mutating func close(_ step: Step, _ rejection: APNsRejection) -> Step {
        var step = step
        step.rejection = rejection
        closed = true
        step.droppedBytes = decoder.buffered
        decoder = APNsFrameDecoder(payloadLimit: decoder.payloadLimit)
        return step
    }

    /// The server is stopping: status 10 with the last identifier taken (nil once closed).
    public mutating func shutdown() -> [UInt8]? {
        guard !closed else { return nil }
        closed = true
        return APNsStatus.shutdown.errorResponse(identifier: lastIdentifier)
    }

    public var isClosed: Bool { closed }
}
