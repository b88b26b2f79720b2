import DeliveryCore
import StoreModel
import PushDomain

/// The host's side of the device sessions: the core (`DeviceSessions`) names connections and early
/// writes by id; the links and write tickets they stand for are kept here, in the same state and so
/// changed in the same critical section.
extension Engine.State {
    /// Takes the device offline at once; returns its link, to be closed.
    mutating func dropDevice(_ token: String) -> (any DeviceLink)? {
        release(core.dropDevice(token)).first
    }

    /// Takes every device offline; returns their links, to be closed.
    mutating func dropAllDevices() -> [any DeviceLink] {
        release(core.dropAllDevices())
    }

    /// Forgets the connections the core released, and their early writes; returns the links to close.
    mutating func release(_ effects: [DeviceEffect]) -> [any DeviceLink] {
        var closing: [any DeviceLink] = []
        for case .release(let connection, let writes, let close) in effects {
            for write in writes { earlyWrites[write] = nil }
            if let link = deviceLinks.remove(connection), close { closing.append(link) }
        }
        return closing
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
}
