import DeviceSimulator
import NIOCore

/// Where a CCS emulator listens (as `/emulator/v1/info` reports it) and who the app server is.
public struct CCSTarget: Sendable {
    public var host: String
    public var ccsPort: Int
    public var devicePort: Int
    public var httpPort: Int
    public var caPEM: String
    public var senderID: String
    public var serverKey: String
    public var app = "com.example.bench"
    /// Where the devices register and connect: another node of the same service (a cluster,
    /// docs/scaling.md), so that every message crosses from one node to the other; nil: this one.
    public var deviceNode: DeviceNode?

    /// Another node's device side: its host, device port, HTTP port (registration) and CA.
    public struct DeviceNode: Sendable {
        public var host: String
        public var devicePort: Int
        public var httpPort: Int
        public var caPEM: String

        public init(host: String, devicePort: Int, httpPort: Int, caPEM: String) {
            self.host = host
            self.devicePort = devicePort
            self.httpPort = httpPort
            self.caPEM = caPEM
        }
    }

    /// The node the devices use: `deviceNode`, or this one.
    var devices: DeviceNode {
        deviceNode ?? DeviceNode(host: host, devicePort: devicePort, httpPort: httpPort, caPEM: caPEM)
    }

    public init(host: String, ccsPort: Int, devicePort: Int, httpPort: Int, caPEM: String, senderID: String,
                serverKey: String) {
        self.host = host
        self.ccsPort = ccsPort
        self.devicePort = devicePort
        self.httpPort = httpPort
        self.caPEM = caPEM
        self.senderID = senderID
        self.serverKey = serverKey
    }

    /// Asks a running emulator for its ports and CA.
    public static func discover(host: String, httpPort: Int, senderID: String, serverKey: String,
                                group: any EventLoopGroup) async throws -> CCSTarget {
        let http = HTTPJSONClient(host: host, port: httpPort, group: group)
        let info = try await http.getJSON("/emulator/v1/info")
        guard let ccs = info["ccs_port"]?.intValue, let device = info["device_port"]?.intValue else {
            throw BenchError("\(host):\(httpPort)/emulator/v1/info has no ccs_port/device_port")
        }
        let ca = try await http.request(.GET, "/emulator/v1/ca.pem")
        guard ca.status == 200 else { throw BenchError("could not fetch the emulator's CA (HTTP \(ca.status))") }
        return CCSTarget(host: host, ccsPort: Int(ccs), devicePort: Int(device), httpPort: httpPort, caPEM: ca.body,
                         senderID: senderID, serverKey: serverKey)
    }
}

/// A standard XMPP server with accounts `PREFIX1…PREFIXn` sharing one password.
public struct XMPPTarget: Sendable {
    public var host: String
    public var port: Int
    public var tls: XMPPLogin.TLSMode
    public var domain: String
    public var userPrefix: String
    public var password: String
    /// Number of the first account (user1 by default).
    public var firstUser: Int

    public init(host: String, port: Int, tls: XMPPLogin.TLSMode, domain: String, userPrefix: String = "user",
                password: String = "password", firstUser: Int = 1) {
        self.host = host
        self.port = port
        self.tls = tls
        self.domain = domain
        self.userPrefix = userPrefix
        self.password = password
        self.firstUser = firstUser
    }

    func user(_ i: Int) -> String { "\(userPrefix)\(firstUser + i)" }
}
