import DeliveryCore
import StoreModel

/// The read-only views the admin API shows, and the one wait it offers: the only surface HTTPAPI
/// uses besides the engine's commands, so that it never reaches into the store or its writer.
extension Engine {
    // The records those views hand out, named here so that HTTPAPI need not import the store.
    public typealias DeviceRecord = StoreModel.DeviceRecord
    public typealias QueuedMessage = StoreModel.QueuedMessage
    public typealias TrayEntry = StoreModel.TrayEntry

    /// The notifications shown in a device's tray, oldest first.
    public func tray(token: String) throws -> [TrayEntry] {
        try store.tray(token: token)
    }

    /// The writer's figures (transactions, ops, live writes committed and called off).
    public var storeStatistics: GroupCommitter.Statistics { committer.statistics }

    /// Returns once everything accepted before the call is committed (live writes still waiting for
    /// a device's confirmation are written at once).
    public func sync() async {
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
            committer.afterPendingWrites { cont.resume() }
        }
    }

    /// Messages handed to the device's connection that it has not ACKed yet (0 when offline).
    public func handedOverUnacknowledged(token: String) -> Int {
        shard(token).withLock { $0.sessions.online[token]?.inFlight.count ?? 0 }
    }

    /// Devices registered (installed or not), for `GET /emulator/v1/info`.
    public var deviceCount: Int { state.withLock { $0.registry.devices.count } }
}

extension Engine {
    /// Devices with an open connection on the device channel.
    public var onlineDeviceCount: Int { eachShard { $0.sessions.online.count }.reduce(0, +) }
    /// App-server connections, open and authenticated.
    public var appServerConnectionCount: Int { state.withLock { $0.outbound.connections.count } }
}
