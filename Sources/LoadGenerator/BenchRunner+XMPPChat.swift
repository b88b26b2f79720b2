extension BenchRunner {
    public func xmppChat(_ target: XMPPTarget) async throws -> BenchResult {
        var result = makeResult("xmpp-chat", server: "XMPP \(target.domain) at \(target.host):\(target.port) (\(target.tls.rawValue) TLS)")
        result.ackLabel = "-"
        result.deliveryLabel = "send→receiver"
        let control = RunControl()
        let credits = DeliveryCredits(senders: options.connections)
        let receivers = (0..<options.devices).map { "\(target.user(options.connections + $0))@\(target.domain)/bench" }
        let recipients = Recipients(receivers)
        let tls = try Self.insecureClientContext()
        // Receivers first, so that no message finds its recipient offline.
        try await connectMany(count: options.devices, what: "XMPP receivers") { i, loop, recorder in
            let login = Self.chatLogin(target, user: target.user(self.options.connections + i), tls: tls)
            return try await self.connect(host: target.host, port: target.port,
                                          tls: target.tls == .direct ? tls : nil, loop: loop) { promise in
                ChatConnection(login: login, recorder: recorder, established: promise, index: i, sending: nil,
                               credits: credits, payloadBytes: self.options.payloadBytes)
            }
        }
        try await connectMany(count: options.connections, what: "XMPP senders") { i, loop, recorder in
            let login = Self.chatLogin(target, user: target.user(i), tls: tls)
            let sending = (plan: self.options.plan(index: i, senders: self.options.connections), control: control,
                           recipients: recipients)
            return try await self.connect(host: target.host, port: target.port,
                                          tls: target.tls == .direct ? tls : nil, loop: loop) { promise in
                ChatConnection(login: login, recorder: recorder, established: promise, index: i, sending: sending,
                               credits: credits, payloadBytes: self.options.payloadBytes)
            }
        }
        try await measure(&result, control: control, senders: options.connections) { t in
            t.delivered + t.errors >= t.sent
        }
        return result
    }
}
