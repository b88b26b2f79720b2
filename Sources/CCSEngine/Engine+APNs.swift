import DeliveryCore
import PushDomain
import StoreModel

/// iOS apps reached through the APNs legacy binary gateway: device tokens, Apple's store-and-forward
/// rule, the feedback service's tuples. The gateway (APNsGateway) maps its frames into a `Message` and
/// `Target.apnsDeviceToken` and calls `send`, like every other front end.
extension Engine {
    /// Who a device token is, for the gateway's status 8 (it must answer before the next notification
    /// on the connection is read, so it asks synchronously; `send` repeats the check).
    public enum APNsRecipient: Sendable, Equatable {
        /// A registration of this bundle id with its app installed.
        case installed
        /// A registration of this bundle id whose app was uninstalled: accepted, then a feedback tuple.
        case uninstalled
        /// No registration has this token.
        case unknown
        /// The token belongs to another app (another bundle id).
        case otherApp
    }

    public func apnsRecipient(deviceToken: String, bundleID: String) -> APNsRecipient {
        state.withLock { s in Self.apnsRecipient(deviceToken: deviceToken, bundleID: bundleID, s).0 }
    }

    static func apnsRecipient(deviceToken: String, bundleID: String, _ s: State) -> (APNsRecipient, DeviceRecord?) {
        guard let token = s.registry.apnsTokens[deviceToken], let device = s.registry.devices[token] else { return (.unknown, nil) }
        guard device.app == bundleID, device.platform == .ios else { return (.otherApp, device) }
        return (device.status == .active ? .installed : .uninstalled, device)
    }

    /// An APNs notification: to the registration holding the device token, or a feedback tuple when the
    /// app is gone. `bundleID` is the provider certificate's topic.
    func sendAPNs(_ message: Message, deviceToken: String, bundleID: String,
                  completion: @escaping @Sendable ([SendResult]) -> Void) {
        let (recipient, device) = state.withLock { s in Self.apnsRecipient(deviceToken: deviceToken, bundleID: bundleID, s) }
        switch recipient {
        case .unknown:
            completion([.refused(.invalidRegistration(token: deviceToken))])
        case .otherApp:
            completion([.refused(.senderMismatch(token: deviceToken, sender: bundleID))])
        case .uninstalled:
            // Apple accepted such a notification and told the provider later, through the feedback service.
            let now = clock.nowMillis()
            let tuple = APNsFeedbackRecord(bundleID: bundleID, deviceToken: deviceToken, timestamp: now / 1000)
            report(apns: .init(event: .feedback, at: now, bundleID: bundleID, deviceToken: deviceToken,
                                      identifier: UInt32(message.messageID) ?? 0))
            committer.submit(.addAPNsFeedback(tuple)) { error in
                completion([error == nil ? .refused(.unregistered(token: deviceToken)) : .refused(.unavailable)])
            }
        case .installed:
            send(message, to: device!.token, senderID: bundleID, origin: .apns(deviceToken: deviceToken)) { completion([$0]) }
        }
    }

    /// The device's queue entry for an APNs notification: what the app receives (the payload as the
    /// provider sent it) with the frame's fields beside it.
    static func apnsQueuedMessage(_ m: Message, token: String, bundleID: String, deviceToken: String,
                                  deviceMessageID: String, now: Int64) -> QueuedMessage {
        // Written key by key in sorted order: the same bytes `JSONValue.encoded()` gives for these
        // objects, without building two dictionaries per notification.
        // The HTTP/2 provider API's headers (apns-id, push type, topic, collapse id) when it sent them.
        let headers = m.apns?["headers"]
        var apns = JSONObjectWriter(capacity: 160)
        if let id = headers?["apns-id"]?.stringValue { apns.add("apns_id", id) }
        apns.add("bundle_id", bundleID)
        if let c = headers?["apns-collapse-id"]?.stringValue { apns.add("collapse_id", c) }
        apns.add("device_token", deviceToken)
        if let e = headers?["apns-expiration"]?.stringValue, let expiry = Int64(e) { apns.add("expiration", expiry) }
        apns.add("identifier", Int64(UInt32(m.messageID) ?? 0))
        let priority = headers?["apns-priority"]?.stringValue.flatMap { Int64($0) } ?? (m.effectivePriority == .high ? 10 : 5)
        apns.add("priority", priority)
        if let t = headers?["apns-push-type"]?.stringValue { apns.add("push_type", t) }
        if let t = headers?["apns-topic"]?.stringValue { apns.add("topic", t) }
        var fields = JSONObjectWriter(capacity: 512)
        fields.add("apns", rawJSON: apns.finished())
        fields.add("from", "apns")
        fields.add("message_id", deviceMessageID)
        fields.add("message_type", "apns")
        if let text = m.apnsPayloadText {
            fields.add("payload", rawJSON: text)
        } else {
            fields.add("payload", json: m.apns?["payload"] ?? .object([:]))
        }
        fields.add("sent_time", now)
        fields.add("ttl", Int64(m.timeToLive))
        return QueuedMessage(token: token, deviceMessageID: deviceMessageID, senderID: bundleID,
                             appMessageID: m.messageID, collapseKey: DeliveryCore.apnsStoreAndForwardKey,
                             priority: m.effectivePriority.rawValue, timeToLive: m.timeToLive, enqueuedAt: now,
                             expiresAt: now + Int64(m.timeToLive) * 1000, deliveryReceiptRequested: false,
                             kind: .apnsNotification, payload: fields.finished())
    }

    // MARK: feedback service

    /// The app's feedback tuples as of now (after every write submitted so far).
    public func apnsFeedback(bundleID: String, completion: @escaping @Sendable (Result<[APNsFeedbackRecord], any Error>) -> Void) {
        committer.afterPendingWrites { [self] in
            completion(Result { try store.apnsFeedback(bundleID: bundleID) })
        }
    }

    /// A feedback connection has written these tuples: they are cleared (a tuple refreshed since stays).
    public func apnsFeedbackRead(_ tuples: [APNsFeedbackRecord]) {
        guard !tuples.isEmpty else { return }
        committer.submit(.removeAPNsFeedback(tuples))
    }

    /// A device confirmed an APNs notification.
    func recordAPNsDelivery(_ m: QueuedMessage, deviceToken: String?) {
        report(apns: .init(event: .delivered, at: clock.nowMillis(), bundleID: m.senderID,
                                  deviceToken: deviceToken ?? "", identifier: UInt32(m.appMessageID) ?? 0))
    }
}

/// How a registration asks for an APNs device token.
public enum APNsTokenRequest: Sendable, Equatable {
    /// A new random token (32 bytes), as iOS hands an app on `registerForRemoteNotifications`.
    case generate
    /// This token (64 hex digits), e.g. the same device registering the app again.
    case token(String)
}
