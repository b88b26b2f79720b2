import NIOCore
import XMLStreaming

/// What to do when an app server has more unanswered downstream messages than the window allows.
/// CCS's own behaviour is undocumented (spec §4); the default keeps going, which every client tolerates.
public enum OverLimitPolicy: String, Sendable, CaseIterable {
    /// Keep accepting (the limit is only reported).
    case accept
    /// NACK the extra message with SERVICE_UNAVAILABLE.
    case nack
    /// Close the stream with a policy-violation stream error.
    case close
}

public struct XMPPServerConfiguration: Sendable {
    public var preAuthLimits: XMLStreamLimits = .preAuth
    public var postAuthLimits: XMLStreamLimits = .postAuth
    /// Connections that have not authenticated by then are closed.
    public var authenticationTimeout: TimeAmount = .seconds(30)
    /// The CCS flow-control window: unanswered downstream messages per connection.
    public var maxPendingDownstream = 100
    public var overLimitPolicy: OverLimitPolicy = .accept
    /// After CONNECTION_DRAINING, the connection is closed once this much time has passed.
    public var drainGracePeriod: TimeAmount = .seconds(10)
    /// An authenticated connection that has read nothing for this long frees its XML parser until its
    /// next bytes (memory of an idle connection). nil: never.
    public var idleParserRelease: TimeAmount? = .seconds(1)
    /// How long an app server that ended its stream waits for the answers to its last messages.
    public var peerEndGracePeriod: TimeAmount = .seconds(5)
    /// Output a peer leaves unread (bytes waiting in the socket's buffer) before the connection is
    /// closed. Reading from the peer already stops at NIO's high-water mark (64 KiB); this bounds what
    /// the emulator's own pushes (upstream, deliveries) can pile up.
    public var maxBufferedOutput = 4 << 20
    /// How long a closing connection's last output may take to go out before the socket is closed anyway.
    public var closeGracePeriod: TimeAmount = .seconds(2)
    /// The bound CCS port, named when an app server logs in on the device channel by mistake.
    public var appServerPort: Int?

    public init() {}
}
