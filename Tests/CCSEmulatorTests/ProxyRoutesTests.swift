@testable import CCSEmulator
import ConnectProxy
import Testing

/// Which listener each CONNECT destination of proxy mode reaches.
@Suite struct ProxyRoutesTests {
    @Test func preProductionReachesItsOwnPortWhenThereIsOneElseTheCCSPort() throws {
        let with = try ProxyRoutes.routes(bindHost: "0.0.0.0", httpsPort: 1443, ccsPort: 1235, ccsPreprodPort: 1236)
        #expect(with[ProxyRoutes.ccs]?.port == 1235)
        #expect(with[ProxyRoutes.ccsPreprod]?.port == 1236)
        #expect(with[ConnectDestination(host: "fcm.googleapis.com", port: 443)]?.port == 1443)
        #expect(with[ProxyRoutes.ccs]?.ipAddress == "127.0.0.1")
        let without = try ProxyRoutes.routes(bindHost: "127.0.0.1", httpsPort: 1443, ccsPort: 1235)
        #expect(without[ProxyRoutes.ccsPreprod]?.port == 1235)
        #expect(without[ConnectDestination(host: "example.com", port: 443)] == nil)
    }

    @Test func applesHostsOn443And2197ReachTheProviderAPI() throws {
        let routes = try ProxyRoutes.routes(bindHost: "127.0.0.1", httpsPort: 1443, ccsPort: 1235, apnsHTTP2Port: 2197)
        for host in ["api.push.apple.com", "api.sandbox.push.apple.com", "api.development.push.apple.com"] {
            for port in [443, 2197] { #expect(routes[ConnectDestination(host: host, port: port)]?.port == 2197, "\(host):\(port)") }
        }
        #expect(routes[ConnectDestination(host: "api.push.apple.com", port: 2195)] == nil)
        #expect(routes[ConnectDestination(host: "fcm.googleapis.com", port: 443)]?.port == 1443)
    }
}
