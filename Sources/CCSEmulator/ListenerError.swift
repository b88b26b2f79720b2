import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A listener that could not bind, told in terms of the option that chose its port.
struct ListenerError: Error, CustomStringConvertible {
    var description: String

    init(_ error: any Error, option: String, port: Int, host: String) {
        switch Self.errno(of: error) {
        case EADDRINUSE?:
            description = "\(option) \(port) on \(host) is already in use (another ccs-emulator?); "
                + "pass \(option) 0 to pick a free port, or another port"
        case EACCES?:
            description = "\(option) \(port) on \(host): permission denied (ports below 1024 need privileges); "
                + "pass \(option) 0 to pick a free port, or a port above 1023"
        case EADDRNOTAVAIL?:
            description = "--bind \(host) is not an address of this machine (\(option) \(port)); try --bind 127.0.0.1"
        default:
            description = "\(option) \(port) on \(host): \(error)"
        }
    }

    /// The errno behind a failed bind, however deep NIO or the HTTP server wrapped it.
    static func errno(of error: any Error) -> Int32? {
        if let io = error as? IOError { return io.errnoCode }
        // Wrapped errors still print their cause; match the system's own text as a last resort.
        let text = String(describing: error)
        for code in [EADDRINUSE, EACCES, EADDRNOTAVAIL] where text.contains(String(cString: strerror(code))) {
            return code
        }
        return nil
    }
}
