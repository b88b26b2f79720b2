import NIOCore
import NIOSSL

extension BenchRunner {
    /// `bench http-v1` / `http-legacy`: `connections` keep-alive HTTP connections send to online
    /// devices (send→answer and send→device latency); with `.noop`, the same requests to a route that
    /// does no work, for the server's ceiling (no devices needed).
    public func httpSend(_ target: CCSTarget, _ http: HTTPSendTarget) async throws -> BenchResult {
        let scheme = http.tls ? "https" : "http"
        var result = makeResult("http-\(http.api.rawValue)", server: "ccs-emulator at \(scheme)://\(target.host):\(http.port)")
        result.ackLabel = "send→HTTP answer"
        let control = RunControl()
        let recipients: Recipients
        if http.api == .noop {
            // Real-looking tokens, never looked up.
            recipients = Recipients((0..<max(options.devices, 1)).map { "noop-token-\($0)" })
            result.notes.append("no-op route: the body is read and {} answered; no authentication, no engine")
        } else {
            let devices = try await registerDevices(target, count: options.devices)
            try await connectDevices(target, devices, upstream: nil)
            recipients = Recipients(devices.map(\.token))
        }
        let tls = http.tls ? try Self.clientContext(caPEM: target.caPEM) : nil
        // The development certificate names localhost, not 127.0.0.1's IP for SNI (an IP is never SNI).
        let hostname = http.tls ? "localhost" : nil
        let path = http.path(senderID: target.senderID)
        let hostHeader = "\(target.host):\(http.port)"
        let payload = options.payloadBytes
        try await connectMany(count: options.connections, what: "HTTP connections") { i, loop, recorder in
            let sending = (plan: self.options.plan(index: i, senders: self.options.connections), control: control,
                           recipients: recipients)
            return try await self.connect(host: target.host, port: http.port, tls: tls, serverHostname: hostname,
                                          loop: loop) { promise in
                HTTPSendConnection(api: http.api, host: hostHeader, path: path, authorization: http.authorization,
                                   recorder: recorder, established: promise, index: i, sending: sending,
                                   payloadBytes: payload)
            }
        }
        let noop = http.api == .noop
        try await measure(&result, control: control, senders: options.connections) { t in
            t.allAnswered && (noop || t.delivered >= t.acked)
        }
        return result
    }
}
