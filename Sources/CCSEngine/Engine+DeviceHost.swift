import DeliveryCore
import StoreModel
import PushDomain

/// The host's side of the device sessions: the core (`DeviceSessions`) names connections and early
/// writes by id; the links and write tickets they stand for are kept here, in the same state and so
/// changed in the same critical section.
extension Engine.State {
    /// A device connection is up: returns its id and the older connection it replaced (to be closed).
    mutating func connectDevice(_ token: String, link: any DeviceLink) -> (DeviceConnectionID, replaced: (any DeviceLink)?) {
        let id = deviceLinks.register(link)
        let replaced = sessions.connect(token, connection: id, platform: registry.devices[token]?.platform)
        return (id, replaced.flatMap { hostForget($0) })
    }

    /// The connection `link` went down; false when a newer connection had already replaced it.
    mutating func disconnectDevice(_ token: String, link: any DeviceLink) -> Bool {
        guard let id = deviceLinks.id(of: link), let gone = sessions.disconnect(token, connection: id) else { return false }
        hostForget(gone)
        return true
    }

    /// Takes the device offline at once; returns its link, to be closed.
    mutating func dropDevice(_ token: String) -> (any DeviceLink)? {
        sessions.drop(token).flatMap { hostForget($0) }
    }

    /// Takes every device offline; returns their links, to be closed.
    mutating func dropAllDevices() -> [any DeviceLink] {
        sessions.dropAll().compactMap { hostForget($0) }
    }

    /// The link of the device's current connection, when it is connected.
    func link(of token: String) -> (any DeviceLink)? {
        sessions.online[token].flatMap { deviceLinks[$0.connection] }
    }

    /// Whether `link` is the device's current connection.
    func isCurrent(_ token: String, _ link: any DeviceLink) -> Bool {
        deviceLinks.id(of: link).map { sessions.isCurrent(token, $0) } ?? false
    }

    /// Keeps an early write's ticket and answer; the core holds its id.
    mutating func keep(_ write: Engine.EarlyWrite) -> EarlyDelivery {
        lastWriteID += 1
        let id = WriteID(lastWriteID)
        earlyWrites[id] = write
        return EarlyDelivery(write: id)
    }

    /// The early write's ticket and answer, while the message it is for is in flight.
    func earlyWrite(_ early: EarlyDelivery?) -> Engine.EarlyWrite? {
        early.flatMap { earlyWrites[$0.write] }
    }

    /// Forgets a write the core no longer names (confirmed, or its connection gone); its commit, if it
    /// comes, answers through its own completion.
    mutating func forget(_ early: EarlyDelivery?) -> Engine.EarlyWrite? {
        early.flatMap { earlyWrites.removeValue(forKey: $0.write) }
    }

    /// A connection left the sessions: its link leaves the table, and so do its early writes.
    private mutating func hostForget(_ gone: OnlineDevice) -> (any DeviceLink)? {
        for entry in gone.inFlight.values where entry.early != nil { _ = forget(entry.early) }
        return deviceLinks.remove(gone.connection)
    }
}
