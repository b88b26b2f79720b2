extension BenchRunner {
    /// `offline`: the devices are registered but never connect, so every message stays queued in the
    /// emulator (at most 100 per device: FCM's limit for non-collapsible messages).
    public func downstream(_ target: CCSTarget, offline: Bool = false) async throws -> BenchResult {
        var result = makeResult("downstream", server: "ccs-emulator at \(target.host):\(target.ccsPort)")
        let control = RunControl()
        let devices = try await registerDevices(target, count: options.devices)
        if offline {
            result.scenario = "downstream-offline"
            result.notes.append("devices offline: messages are ACKed and stay queued, none is delivered")
        } else {
            try await connectDevices(target, devices, upstream: nil)
        }
        let recipients = Recipients(devices.map(\.token))
        try await connectAppServers(target) { index in
            (plan: self.options.plan(index: index, senders: self.options.connections), control: control,
             recipients: recipients)
        }
        try await measure(&result, control: control, senders: options.connections) { t in
            t.allAnswered && (offline || t.delivered >= t.acked)
        }
        return result
    }

    public func upstream(_ target: CCSTarget) async throws -> BenchResult {
        var result = makeResult("upstream", server: "ccs-emulator at \(target.host):\(target.ccsPort)")
        result.ackLabel = "send→sent"
        result.deliveryLabel = "send→app server"
        result.window = options.upstreamWindow
        result.notes.append("device window \(options.upstreamWindow): messages a device may have sent that no app server has received yet")
        let control = RunControl()
        let credits = DeliveryCredits(senders: options.devices)
        try await connectAppServers(target, upstreamCredits: credits) { _ in nil }
        let devices = try await registerDevices(target, count: options.devices)
        try await connectDevices(target, devices) { index in
            (plan: self.options.plan(index: index, senders: self.options.devices, window: self.options.upstreamWindow),
             control: control, senderID: target.senderID, credits: credits)
        }
        try await measure(&result, control: control, senders: options.devices) { t in
            t.allAnswered && t.delivered >= t.acked
        }
        return result
    }
}
