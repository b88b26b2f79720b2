public struct BenchError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// What every scenario shares.
public struct BenchOptions: Sendable {
    /// App-server connections (downstream, upstream), chat senders (xmpp-chat), idle connections (connections).
    public var connections = 1
    /// Simulated devices (downstream, upstream), chat receivers (xmpp-chat).
    public var devices = 1
    /// Total messages; nil: run for `duration`.
    public var messages: Int?
    public var duration: Double = 10
    public var payloadBytes = 32
    /// Messages per second for all senders together (open loop); nil: closed loop.
    public var rate: Double?
    /// Unanswered messages per sending connection (CCS: 100).
    public var window = 100
    /// Upstream: messages each device may have sent and no app server received yet; nil: as many in
    /// total as the app-server connections' windows hold (window × connections / devices, at least 1).
    public var deviceWindow: Int?
    public var threads = 2
    /// The server process to read /proc for.
    public var serverPID: Int32?
    public var serverIsThisProcess = false
    /// How long to wait for answers after the last message went out.
    public var drainTimeout: Double = 30
    /// Connections opened at the same time while setting up.
    public var connectConcurrency = 64
    public var progress = ProgressLine()

    public init() {}

    var upstreamWindow: Int { deviceWindow ?? max(1, window * connections / max(devices, 1)) }

    func plan(index: Int, senders: Int, window: Int? = nil) -> SendPlan {
        var quota: Int?
        if let messages {
            quota = messages / senders + (index < messages % senders ? 1 : 0)
        }
        let mode: SendMode = rate.map { .openLoop(perSecond: $0) } ?? .closedLoop
        let share = (rate ?? 0) / Double(max(senders, 1))
        return SendPlan(mode: mode, quota: quota, window: window ?? self.window, perSecond: share,
                        phase: Double(index) / Double(max(senders, 1)))
    }
}
