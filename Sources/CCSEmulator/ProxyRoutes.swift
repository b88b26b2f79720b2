import ConnectProxy
import NIOCore

/// Which CONNECT destinations proxy mode tunnels, and to which of the emulator's own listeners.
enum ProxyRoutes {
    /// Google's HTTPS API hosts the emulator answers (every one on the same routes).
    static let httpsHosts = ["fcm.googleapis.com", "iid.googleapis.com", "oauth2.googleapis.com",
                             "iamcredentials.googleapis.com", "gcm-http.googleapis.com", "android.googleapis.com"]
    /// CCS: production 5235 and pre-production 5236 both reach the emulator's CCS port.
    static let ccsDestinations = [ConnectDestination(host: "fcm-xmpp.googleapis.com", port: 5235),
                                  ConnectDestination(host: "fcm-xmpp.googleapis.com", port: 5236)]

    static func routes(bindHost: String, httpsPort: Int, ccsPort: Int) throws -> [ConnectDestination: SocketAddress] {
        // A listener bound to every address is reached on loopback.
        let host = switch bindHost {
        case "0.0.0.0", "": "127.0.0.1"
        case "::", "[::]": "::1"
        default: bindHost
        }
        let https = try SocketAddress.makeAddressResolvingHost(host, port: httpsPort)
        let ccs = try SocketAddress.makeAddressResolvingHost(host, port: ccsPort)
        var routes: [ConnectDestination: SocketAddress] = [:]
        for name in httpsHosts { routes[ConnectDestination(host: name, port: 443)] = https }
        for destination in ccsDestinations { routes[destination] = ccs }
        return routes
    }
}
