import CCSProtocol
import PushDomain
import Foundation

/// A command of the `device` command's stdin, one JSON line each (docs/device-protocol.md).
public enum DeviceCommandLine: Sendable, Equatable {
    case go(String)
    case tap(String)
    case upstream([String: JSONValue])
    /// Subscribe (true) or unsubscribe (false).
    case subscribe(String, Bool)
    case show(String)
    /// A token refresh (`{"refresh":"token"}`), as FirebaseMessagingService.onNewToken sees it.
    case refreshToken
    case invalid(String)

    /// The command one stdin line holds; nil for a blank line (skipped). Any other line that is not a
    /// command is `.invalid` with the line as trimmed, which the session answers with an error event.
    public init?(line: String) {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        if trimmed.isEmpty { return nil }
        guard case .object(let o)? = try? JSONValue.parse(trimmed) else {
            self = .invalid(trimmed)
            return
        }
        if case .string(let state)? = o["go"] {
            self = .go(state)
        } else if case .string(let id)? = o["tap"] {
            self = .tap(id)
        } else if case .object(let up)? = o["upstream"] {
            self = .upstream(up)
        } else if case .string(let topic)? = o["subscribe"] {
            self = .subscribe(topic, true)
        } else if case .string(let topic)? = o["unsubscribe"] {
            self = .subscribe(topic, false)
        } else if case .string(let view)? = o["show"] {
            self = .show(view)
        } else if case .string("token")? = o["refresh"] {
            self = .refreshToken
        } else {
            self = .invalid(trimmed)
        }
    }
}
