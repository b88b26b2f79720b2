import DeliveryCore
import PushDomain

/// The metrics as an observer of the engine's events: what `/metrics` counts (docs/admin-api.md#metrics).
extension EngineMetrics: DeliveryObserver {
    public func observe(_ event: DeliveryEvent) {
        switch event {
        case .answered(let request, let results, let refusals):
            for (index, result) in results.enumerated() {
                answered(request, result, refusal: index < refusals.count ? refusals[index] : nil)
            }
        case .refusedAtEdge(let r): answered(api: r.api, outcome: .refused, code: Self.code(r.detail))
        case .message(.deviceAcked, _, _, _): deviceAcks.increment()
        case .fannedOut(_, _, let devices):
            fanOuts.increment()
            fanOutDevices.increment(by: devices)
        case .handedOver(let deliveries, let platform): delivered(deliveries.count, platform: platform)
        case .outboundSent(.upstream): outboundUpstream.increment()
        case .outboundSent(.receipt): outboundReceipts.increment()
        case .sendTook(let api, let nanoseconds): sendTook(api: api, nanoseconds: nanoseconds)
        case .committed(let ops, let nanoseconds):
            commitDuration.recordNanoseconds(Int64(nanoseconds))
            batchSize.record(ops)
        case .message, .receipt, .tapped, .removed, .batchEnded, .faultApplied, .appServer, .apns: break
        }
    }

    private func answered(_ request: SendRequest, _ result: SendResult, refusal: String?) {
        let api = request.origin.api
        switch result {
        case .accepted(_, nil, _): answered(api: api, outcome: .notStored)
        case .fannedOut where request.message.dryRun: answered(api: api, outcome: .notStored)
        case .accepted, .fannedOut: answered(api: api, outcome: .accepted)
        case .refused: answered(api: api, outcome: .refused, code: Self.code(refusal ?? ""))
        case .group(let outcome):
            answered(api: api, outcome: outcome.allFailed ? .refused : .accepted,
                     code: outcome.allFailed ? "device group: every member failed" : "")
        }
    }

    /// A refusal's code as a metric label: the code alone (`BAD_REGISTRATION`, `InvalidRegistration`,
    /// `UNREGISTERED`, a Web Push status), not the journal's wording around it (`NACK …`, `Error=…`,
    /// `HTTP 404 …`, `Web Push 400: …`).
    static func code(_ detail: String) -> String {
        var d = Substring(detail)
        // Web Push's "Web Push 400: <reason>": the status is the code.
        if d.hasPrefix("Web Push ") { return String(d.dropFirst(9).prefix { $0 != ":" }) }
        if d.hasPrefix("Error=") { d = d.dropFirst(6) }
        if let space = d.lastIndex(of: " "), d.hasPrefix("NACK ") || d.hasPrefix("HTTP ") { d = d[d.index(after: space)...] }
        return String(d)
    }
}
