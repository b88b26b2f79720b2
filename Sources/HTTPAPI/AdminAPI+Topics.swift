import DeliveryCore
import CCSEngine
import CCSProtocol
import PushDomain
import Foundation
import Hummingbird

/// Topics in the admin API: what a device subscribed to (as the client SDK's `subscribeToTopic`
/// would) and who listens to a sender's topics.
extension AdminAPI {
    func addTopicRoutes(to v1: RouterGroup<some RequestContext>) {
        v1.post("devices/:token/topics/:topic") { request, context in
            try await self.changeTopic(request, context, subscribe: true)
        }
        v1.delete("devices/:token/topics/:topic") { request, context in
            try await self.changeTopic(request, context, subscribe: false)
        }
        v1.get("topics") { request, _ in
            guard let sender = request.uri.queryParameters.get("sender") else {
                throw APIError.badRequest("give the sender: /emulator/v1/topics?sender=SENDER_ID")
            }
            let counts = self.engine.topicSubscriberCounts(senderID: String(sender))
            let list = counts.sorted { $0.key < $1.key }.map { JSONValue.object(["topic": .string($0.key), "subscribers": .int(Int64($0.value))]) }
            return JSONResponse.make(.object(["sender_id": .string(String(sender)), "topics": .array(list)]))
        }
    }

    /// `?sender=S` picks the sender for a device registered with several; default its first.
    private func changeTopic(_ request: Request, _ context: some RequestContext, subscribe: Bool) async throws -> Response {
        let token = self.installationToken(try context.parameters.require("token"))
        let raw = try context.parameters.require("topic")
        let topic = raw.removingPercentEncoding ?? raw
        guard let device = engine.device(token: token) else { throw APIError.notFound("no device with token \(token)") }
        guard DownstreamTarget.isValidTopicName(topic) else {
            throw APIError.badRequest("topic names match [a-zA-Z0-9-_.~%]{1,\(DownstreamTarget.maximumTopicNameLength)}")
        }
        let sender = request.uri.queryParameters.get("sender").map { String($0) } ?? device.senders.first ?? ""
        let change = [TopicSubscriptionChange(token: token, senderID: sender)]
        let result = subscribe ? await engine.subscribe(change, to: topic)[0]
                               : await engine.unsubscribe(change, from: topic, allowMissing: false)[0]
        switch result {
        case .success:
            return JSONResponse.make(.object(["token": .string(token), "sender_id": .string(sender), "topic": .string(topic),
                                              "subscribed": .bool(subscribe)]))
        case .failure(.notFound): throw APIError.notFound("the device's app was uninstalled")
        case .failure(.notSubscribed): throw APIError.notFound("the device is not subscribed to \(topic)")
        case .failure(.senderMismatch): throw APIError.badRequest("the device is not registered for sender \(sender)")
        case .failure(.tooManyTopics): throw APIError.badRequest("the device already has \(Engine.maximumTopicsPerToken) topics (TOO_MANY_TOPICS)")
        case .failure(.internalError): throw APIError.internalError("could not store the subscription")
        }
    }
}
