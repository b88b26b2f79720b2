import ConnectProxy
import NIOCore

/// Which CONNECT destinations proxy mode tunnels, and to which of the emulator's own listeners.
enum ProxyRoutes {
    /// Google's HTTPS API hosts the emulator answers (every one on the same routes).
    static let httpsHosts = ["fcm.googleapis.com", "iid.googleapis.com", "oauth2.googleapis.com",
                             "iamcredentials.googleapis.com", "gcm-http.googleapis.com", "android.googleapis.com"]
    /// CCS: production 5235 reaches the emulator's CCS port, pre-production 5236 its
    /// `--ccs-preprod-port` when it has one, else the CCS port too.
    static let ccs = ConnectDestination(host: "fcm-xmpp.googleapis.com", port: 5235)
    static let ccsPreprod = ConnectDestination(host: "fcm-xmpp.googleapis.com", port: 5236)

    /// APNs' HTTP/2 provider API: each host on Apple's ports 443 and 2197 reaches `--apns-http2-port`.
    static let apnsHosts = ["api.push.apple.com", "api.sandbox.push.apple.com", "api.development.push.apple.com"]
    static let apnsPorts = [443, 2197]

    static func routes(bindHost: String, httpsPort: Int, ccsPort: Int,
                       ccsPreprodPort: Int? = nil, apnsHTTP2Port: Int? = nil) throws -> [ConnectDestination: SocketAddress] {
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
        routes[Self.ccs] = ccs
        if let apnsHTTP2Port {
            let apns = try SocketAddress.makeAddressResolvingHost(host, port: apnsHTTP2Port)
            for name in apnsHosts { for port in apnsPorts { routes[ConnectDestination(host: name, port: port)] = apns } }
        }
        routes[Self.ccsPreprod] = try ccsPreprodPort.map { try SocketAddress.makeAddressResolvingHost(host, port: $0) } ?? ccs
        return routes
    }
}
