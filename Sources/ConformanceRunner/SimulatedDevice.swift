import StoreModel
import DeviceSimulator
import Locking
import NIOCore
import PushDomain

/// One of a scenario's devices: its registration, its connection to the device channel, and what
/// it received.
final class SimulatedDevice: Sendable {
    struct State {
        var connection: DeviceConnection?
        /// Downstream messages as the app saw them (notices excluded), in arrival order.
        var received: [JSONValue] = []
        /// How many of them earlier expectations consumed.
        var consumed = 0
        /// Answers to upstream messages (`sent` / `send_error`), by message id.
        var answers: [String: JSONValue] = [:]
    }

    let name: String
    let record: DeviceRecord
    let state = Locked(State())

    init(name: String, record: DeviceRecord) {
        self.name = name
        self.record = record
    }

    var token: String { record.token }

    func connect(host: String, port: Int, caPEM: String, group: any EventLoopGroup) async throws {
        let credentials = DeviceCredentials(token: record.token, deviceID: record.deviceID, secret: record.secret,
                                            app: record.app, senders: record.senders, platform: record.platform.rawValue)
        let connection = try await DeviceConnection.connect(host: host, port: port, caPEM: caPEM, credentials: credentials,
                                                            group: group) { [self] event in
            switch event {
            case .message(let json, _, _):
                if json["message_type"] == nil { state.withLock { $0.received.append(json) } }
            case .upstreamAnswer(let json):
                if let id = json["message_id"]?.stringValue { state.withLock { $0.answers[id] = json } }
            case .connected, .disconnected:
                break
            }
        }
        state.withLock { $0.connection = connection }
    }

    func disconnect() async {
        let connection = state.withLock { s -> DeviceConnection? in
            defer { s.connection = nil }
            return s.connection
        }
        await connection?.close()
    }

    func sendUpstream(_ message: JSONValue) -> Bool {
        guard let connection = state.withLock({ $0.connection }), connection.isActive else { return false }
        connection.sendUpstream(message)
        return true
    }

    func answer(to messageID: String) -> JSONValue? { state.withLock { $0.answers[messageID] } }

    /// Takes `count` unconsumed messages if there are that many.
    func take(_ count: Int) -> Bool {
        state.withLock { s in
            guard s.received.count - s.consumed >= count else { return false }
            s.consumed += count
            return true
        }
    }

    var unconsumed: Int { state.withLock { $0.received.count - $0.consumed } }
}
