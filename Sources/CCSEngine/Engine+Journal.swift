import DeliveryCore
import PushDomain
import StoreModel

/// How the engine reports what happens to messages (`DeliveryEvent`) to its observers: the message
/// journal, the metrics, and any a test or a host adds (`Engine.init(observers:)`).
extension Engine {
    /// Tells every observer; the event is not even made when nobody listens.
    func report(_ event: @autoclosure () -> DeliveryEvent) {
        guard !observers.isEmpty else { return }
        let e = event()
        for o in observers { o.observe(e) }
    }

    /// The front ends' answers to a send request: one `accepted`, `not_stored` or `refused` event per
    /// result. `refusal` renders a refusal in the front end's own words (a NACK code, an HTTP error).
    public func recordAnswers(_ request: SendRequest, _ results: [SendResult], refusal: (SendError) -> String) {
        guard !observers.isEmpty else { return }
        let refusals = results.map { result -> String? in
            if case .refused(let error) = result { return refusal(error) } else { return nil }
        }
        report(.answered(request, results, refusals: refusals))
    }

    /// A message a front end refused before it reached the engine (bad JSON, a draining connection,
    /// a malformed request).
    public func recordRefused(api: SendAPI, sender: String?, token: String? = nil, topic: String? = nil,
                               connection: String? = nil, clientMessageID: String? = nil, detail: String) {
        report(.refusedAtEdge(EdgeRefusal(api: api, sender: sender, token: token, topic: topic, connection: connection,
                                          clientMessageID: clientMessageID, detail: detail)))
    }

    /// One step of a stored message's life.
    func journal(_ step: DeliveryEvent.MessageStep, _ m: QueuedMessage, token: String? = nil, detail: String? = nil) {
        report(.message(step, m, token: token, detail: detail))
    }

    /// Reports the store's removals (collapse, the limits, expiry), the end of each batch and each
    /// commit's size and time.
    func connectObservers() {
        guard !observers.isEmpty else { return }
        // Weak: the store outlives nothing of the engine's, and must not keep it alive.
        committer.store.observeRemovals { [weak self] removals in self?.report(.removed(removals)) }
        committer.afterEachBatch { [weak self] in self?.report(.batchEnded) }
        committer.observeBatches { [weak self] ops, nanoseconds in self?.report(.committed(ops: ops, nanoseconds: nanoseconds)) }
    }
}

/// What the front ends tell the engine about app servers (`AppServerEvent`), and the audit's state
/// they need while a request is open.
extension Engine {
    /// An app server's act, as its front end saw it; the audit hears it through its observer.
    public func report(appServer event: @autoclosure () -> AppServerEvent) {
        report(.appServer(event()))
    }

    /// What the APNs gateway accepted or rejected, a confirmation or a feedback tuple: kept in the
    /// engine's window of APNs activity (the admin API's), and told to the observers. Not an observer
    /// itself: it would hear every event, so no event could ever be skipped for want of a listener.
    public func report(apns entry: APNsActivity.Entry) {
        apnsActivity.record(entry)
        report(.apns(entry))
    }

    /// Whether anyone audits app servers (`serve --audit off`: no): a front end skips the work of
    /// describing a request (its body's digest) when not.
    public var isAuditing: Bool { audit.isEnabled }

    /// Counts one HTTP send request from its arrival to its answer, so that a report read meanwhile
    /// waits for what the answer tells the audit (`Auditor.openHTTPRequests`).
    public func whileSendRequestOpen<T>(_ body: () async throws -> T) async rethrows -> T {
        try await audit.whileHTTPRequestOpen(body)
    }
}
