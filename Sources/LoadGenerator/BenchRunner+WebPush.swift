import DeviceSimulator
import NIOCore
import PushDomain
import WebPushService

extension BenchRunner {
    /// A simulated browser subscribed with the emulator as its push service.
    struct WebPushSubscriber: Sendable {
        var registration: Registration
        var subscription: WebPushSubscription
        var keys: SubscriptionPrivateKeys
    }

    /// `bench web-push`: `devices` browsers subscribe (`POST /emulator/v1/web-push/subscriptions`) and
    /// connect; `connections` keep-alive HTTP connections post encrypted, VAPID-signed messages to
    /// their endpoints round-robin. Accepted: a 201; delivered: the browser decrypted the payload and
    /// read its stamp (send→device latency includes the encryption and the decryption).
    public func webPushSend(_ target: CCSTarget) async throws -> BenchResult {
        var result = makeResult("web-push", server: "ccs-emulator at http://\(target.host):\(target.httpPort)/fcm/send/")
        result.ackLabel = "send→201"
        let subscribers = try await registerWebPushSubscribers(target, count: options.devices)
        try await connectWebPushBrowsers(target, subscribers)
        let vapid = VAPIDKey.generate()
        // Every endpoint is on https://fcm.googleapis.com (the subscriptions' default form): one token.
        let authorization = try vapid.authorization(endpoint: "https://fcm.googleapis.com/fcm/send/x",
                                                    nowMillis: Int64(MonotonicClock.wallMillis()))
        let plan = WebPushPlan(subscriptions: subscribers.map(\.subscription), authorization: authorization,
                               host: "\(target.host):\(target.httpPort)")
        let recipients = Recipients(subscribers.map(\.registration.token))
        result.notes.append("each payload encrypted (aes128gcm) by the generator and decrypted by its browser")
        let control = RunControl()
        let payload = options.payloadBytes
        try await connectMany(count: options.connections, what: "HTTP connections") { i, loop, recorder in
            let sending = (plan: self.options.plan(index: i, senders: self.options.connections), control: control,
                           recipients: recipients)
            return try await self.connect(host: target.host, port: target.httpPort, tls: nil, loop: loop) { promise in
                HTTPSendConnection(api: .webpush, host: plan.host, path: "/fcm/send/", authorization: nil, recorder: recorder,
                                   established: promise, index: i, sending: sending, payloadBytes: payload, webPush: plan)
            }
        }
        try await measure(&result, control: control, senders: options.connections) { t in
            t.allAnswered && t.delivered >= t.acked
        }
        return result
    }

    func registerWebPushSubscribers(_ target: CCSTarget, count: Int) async throws -> [WebPushSubscriber] {
        let http = HTTPJSONClient(host: target.host, port: target.httpPort, group: group)
        let body = JSONValue.object(["app": .string(target.app), "sender": .string(target.senderID)])
        var out: [WebPushSubscriber] = []
        out.reserveCapacity(count)
        for done in 0..<count {
            let json = try await http.postJSON("/emulator/v1/web-push/subscriptions", body)
            guard let c = DeviceCredentials(json: json), let given = json["subscription"],
                  case .success(var subscription) = WebPushSubscription.parse(given),
                  let privateKey = json["private_key"]?.stringValue else {
                throw BenchError("unexpected answer from POST /emulator/v1/web-push/subscriptions: \(json.encoded().prefix(200))")
            }
            subscription.serviceKeys = .init(privateKey: privateKey, applicationServerKey: nil)
            guard let keys = SubscriptionPrivateKeys(subscription) else { throw BenchError("a subscription's private key does not load") }
            out.append(WebPushSubscriber(registration: Registration(token: c.token, deviceID: c.deviceID, secret: c.secret),
                                         subscription: subscription, keys: keys))
            if (done + 1) % 100 == 0 { options.progress.update("subscribing browsers: \(done + 1) of \(count)") }
        }
        options.progress.finish()
        return out
    }

    func connectWebPushBrowsers(_ target: CCSTarget, _ subscribers: [WebPushSubscriber]) async throws {
        let tls = try Self.clientContext(caPEM: target.caPEM)
        let isAddress = (try? SocketAddress(ipAddress: target.host, port: 0)) != nil
        try await connectMany(count: subscribers.count, what: "browsers") { i, loop, recorder in
            let s = subscribers[i]
            let login = XMPPLogin(domain: "devices.ccs-emulator", user: s.registration.deviceID, password: s.registration.secret,
                                  resource: "device")
            return try await self.connect(host: target.host, port: target.devicePort, tls: tls,
                                          serverHostname: isAddress ? nil : target.host, loop: loop) { promise in
                DeviceChannelConnection(login: login, recorder: recorder, established: promise, index: i,
                                        upstream: nil, payloadBytes: 0, webPushKeys: s.keys)
            }
        }
    }
}
