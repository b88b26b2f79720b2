import CCSEngine
import CCSProtocol
import PushDomain
import HTTPRequestBody
import HTTPTypes
import Hummingbird
import NIOCore
import WebPushService

/// FCM as a browser's push service (docs/web-push.md): `POST /fcm/send/<token>` and `/wp/<token>`,
/// the endpoints of Chrome's subscriptions. `PushRequestValidator` decides; this host reads the
/// request, applies `http_error` fault rules, and hands an accepted message to the engine for the
/// subscription's web device (still encrypted), so that the journal, metrics and store-and-forward
/// treat it as every other message.
extension FCMHTTPAPI {
    func addWebPushRoutes(to router: Router<some RequestContext>) {
        for prefix in ["fcm/send", "wp"] {
            router.post(RouterPath("\(prefix)/:subscription")) { request, context in
                try await self.webPush(request, token: Self.pathToken(try context.parameters.require("subscription")))
            }
        }
        addWebPushAdminRoutes(to: router)
    }

    func webPush(_ request: Request, token: String) async throws -> Response {
        let record = engine.device(token: token)
        let sender = record?.senders.first
        let body: ByteBuffer
        do {
            body = try await request.collectBody(limit: PushRequestValidator.maximumPayloadBytes)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            return webPushRefused(PushRefusal(.payloadTooLarge, "the payload is over \(PushRequestValidator.maximumPayloadBytes) bytes"),
                                  token: token, sender: sender)
        }
        let h = request.headers
        let pushRequest = PushRequest(
            ttl: h[HTTPField.Name("TTL")!], urgency: h[HTTPField.Name("Urgency")!], topic: h[HTTPField.Name("Topic")!],
            contentEncoding: h[.contentEncoding], encryption: h[HTTPField.Name("Encryption")!],
            cryptoKey: h[HTTPField.Name("Crypto-Key")!], authorization: h[.authorization], body: Array(buffer: body))
        let standing = Self.standing(of: record)
        let audience = record?.webSubscription?.endpointOrigin ?? ""
        let accepted: AcceptedPushMessage
        switch PushRequestValidator.validate(pushRequest, subscription: standing, audience: audience,
                                             nowSeconds: engine.clock.nowMillis() / 1000, verifiedTokens: verifiedVAPIDTokens) {
        case .failure(let refusal): return webPushRefused(refusal, token: token, sender: sender)
        case .success(let a): accepted = a
        }
        guard let record, let sender else { return webPushRefused(PushRefusal(.notFound, "no such push subscription"), token: token, sender: nil) }
        if let injected = injectedHTTPError(api: "webpush", sender: sender, target: .token(record.token)) {
            engine.recordRefused(api: .webpush, sender: sender, token: record.token,
                                 detail: "Web Push \(injected.status): injected fault")
            return Self.injectedLegacyResponse(status: injected.status, retryAfter: injected.retryAfter)
        }
        return await deliverWebPush(accepted, to: record, sender: sender, audience: audience)
    }

    /// What the path's token names: only a web device whose subscription the emulator made is one
    /// this endpoint serves (another web device's subscription names another push service, or none).
    static func standing(of record: Engine.DeviceRecord?) -> SubscriptionStanding {
        guard let record, record.platform == .web, let subscription = record.webSubscription,
              subscription.serviceKeys != nil else { return .unknown }
        return record.status == .active ? .active(subscription) : .gone
    }

    /// The message to the subscription's device through the engine; 201 with its resource's URL.
    func deliverWebPush(_ accepted: AcceptedPushMessage, to record: Engine.DeviceRecord, sender: String,
                        audience: String) async -> Response {
        let message = Message(messageID: Self.newMessageID("webpush-"), collapseKey: accepted.topic,
                              priority: accepted.urgency == .high ? .high : .normal, timeToLive: accepted.ttl,
                              data: PushedMessage(accepted).data)
        let sendRequest = SendRequest(sender: sender, target: .token(record.token), message: message,
                                      origin: SendOrigin(api: .webpush))
        let results: [SendResult] = await withCheckedContinuation { cont in
            engine.send(sendRequest) { cont.resume(returning: $0) }
        }
        engine.recordAnswers(sendRequest, results, refusal: { Self.journalDetail(Self.webPushRefusal(for: $0)) })
        switch results.first {
        case .accepted(_, let id, _)?:
            let resource = id ?? Self.newMessageID("not-stored-")
            webPushInbox.received(accepted, id: resource, token: record.token, atMillis: engine.clock.nowMillis())
            var response = Response(status: .created)
            // RFC 8030 §5: the push message's own resource.
            response.headers[.location] = audience + "/m/" + resource.replacingOccurrences(of: "%", with: "%25")
            if accepted.ttlCapped { response.headers[HTTPField.Name("TTL")!] = String(accepted.ttl) }
            return response
        case .refused(let error)?:
            return Self.webPushResponse(Self.webPushRefusal(for: error), retryAfterMillis: Self.retryAfter(error))
        default:
            return Self.webPushResponse(PushRefusal(.notFound, "no such push subscription"), retryAfterMillis: nil)
        }
    }

    /// A refusal before the engine: journaled (with the reason) and counted like every refused send.
    func webPushRefused(_ refusal: PushRefusal, token: String, sender: String?) -> Response {
        engine.recordRefused(api: .webpush, sender: sender, token: String(token.prefix(300)),
                             detail: Self.journalDetail(refusal))
        return Self.webPushResponse(refusal, retryAfterMillis: nil)
    }

    /// `Web Push 400: <reason>`: the journal's detail; the metrics take the status as the code.
    static func journalDetail(_ refusal: PushRefusal) -> String { "Web Push \(refusal.status.rawValue): \(refusal.reason)" }

    /// FCM answers push service errors as plain text, the reason on one line.
    static func webPushResponse(_ refusal: PushRefusal, retryAfterMillis: Int64?) -> Response {
        var response = plainText(status: HTTPResponse.Status(code: refusal.status.rawValue), refusal.reason)
        if let retryAfterMillis { response.headers[.retryAfter] = String(max(1, (retryAfterMillis + 999) / 1000)) }
        return response
    }

    /// The engine's refusals in the push service's words.
    static func webPushRefusal(for error: SendError) -> PushRefusal {
        switch error {
        case .unregistered: return PushRefusal(.gone, "push subscription has unsubscribed or expired")
        case .deviceMessageRateExceeded: return PushRefusal(.tooManyRequests, "too many messages to this subscription")
        case .messageTooBig(_, let bytes): return PushRefusal(.payloadTooLarge, "the message is \(bytes) bytes")
        case .unavailable: return PushRefusal(.serviceUnavailable, "the store cannot take messages now; retry later")
        default: return PushRefusal(.notFound, "no such push subscription")
        }
    }

    static func retryAfter(_ error: SendError) -> Int64? {
        switch error {
        case .deviceMessageRateExceeded(_, let wait): return wait
        case .unavailable: return 1000
        default: return nil
        }
    }
}
