import DeliveryCore
/// Why a device-management command (register, change state, uninstall, reinstall, tap, reset) was
/// refused; the admin API answers each with its HTTP status.
public enum DeviceManagementError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidRequest(String)
    case unknownSender(String)
    case unknownDevice(String)
    case storeFailure(String)

    public var description: String {
        switch self {
        case .invalidRequest(let s): return s
        case .unknownSender(let s): return "sender \(s) is not configured (strict auth mode)"
        case .unknownDevice(let s): return "no device with token \(s)"
        case .storeFailure(let s): return "could not store the change: \(s)"
        }
    }
}
