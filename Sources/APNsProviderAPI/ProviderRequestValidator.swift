import Foundation
import PushDomain

/// Apple's rules for a notification request, checked in one place: headers + path + payload and who
/// sent it in, an accepted notification or Apple's reason out ("Sending notification requests to
/// APNs"; where Apple names no reason for a rule, the choice is written in docs/apns.md).
public struct ProviderRequestValidator: Sendable {
    /// The headers a request may carry once (a second one is `DuplicateHeaders`).
    static let singleHeaders: Set<String> = ["authorization", "apns-id", "apns-topic", "apns-push-type", "apns-priority",
                                             "apns-expiration", "apns-collapse-id"]
    public static let collapseIDLimit = 64

    public init() {}

    public func validate(_ request: ProviderRequest, deviceToken: String,
                         authorization: ProviderConnection.Authorization,
                         makeID: () -> String = { UUID().uuidString }) -> Result<ProviderNotification, ProviderReason> {
        var seen = Set<String>()
        for h in request.headers where Self.singleHeaders.contains(h.name) {
            guard seen.insert(h.name).inserted else { return .failure(.duplicateHeaders) }
        }
        let apnsID: String
        if let given = request.header("apns-id") {
            guard UUID(uuidString: given) != nil, given.utf8.count == 36 else { return .failure(.badMessageId) }
            apnsID = given
        } else {
            apnsID = makeID()
        }
        let pushType: PushType
        switch request.header("apns-push-type") {
        case nil: pushType = .alert  // Apple's default when a provider leaves it out
        case let name?:
            guard let known = PushType(rawValue: name) else { return .failure(.invalidPushType) }
            pushType = known
        }
        let topic: (topic: String, bundleID: String)
        switch self.topic(request.header("apns-topic"), pushType: pushType, authorization: authorization) {
        case .failure(let reason): return .failure(reason)
        case .success(let t): topic = t
        }
        let headers: (priority: Int, expiration: Int64?, collapseID: String?)
        switch self.headers(request, pushType: pushType) {
        case .failure(let reason): return .failure(reason)
        case .success(let h): headers = h
        }
        let payload: JSONValue?
        switch self.payload(request.body, pushType: pushType) {
        case .failure(let reason): return .failure(reason)
        case .success(let p): payload = p
        }
        return .success(ProviderNotification(deviceToken: deviceToken, topic: topic.topic, bundleID: topic.bundleID,
                                             pushType: pushType, priority: headers.priority,
                                             expiration: headers.expiration, collapseID: headers.collapseID,
                                             apnsID: apnsID, payload: request.body, parsedPayload: payload))
    }

    /// `apns-topic`: required with tokens (a certificate names its own), the suffix its push type
    /// needs, a bundle id the certificate or the key may push to; Live Activities take tokens only.
    func topic(_ header: String?, pushType: PushType,
               authorization: ProviderConnection.Authorization) -> Result<(topic: String, bundleID: String), ProviderReason> {
        let topic: String
        switch (header, authorization) {
        case (let given?, _): topic = given
        case (nil, .certificate(let bundleID)): topic = bundleID + (pushType.topicSuffix ?? "")
        case (nil, .token): return .failure(.missingTopic)
        }
        guard !topic.isEmpty, topic.utf8.count <= 255, !topic.contains(" ") else { return .failure(.badTopic) }
        let (bundleID, suffix) = PushType.bundleID(ofTopic: topic)
        // A push type goes to its own topic; a suffix of another type is the wrong topic for it.
        guard suffix == pushType.topicSuffix else { return .failure(.badTopic) }
        switch authorization {
        case .certificate(let certificateBundleID):
            guard bundleID == certificateBundleID else { return .failure(.badTopic) }
            // Apple: Live Activity updates need token-based authentication.
            if pushType == .liveactivity { return .failure(.forbidden) }
        case .token(let key):
            guard key.allows(bundleID: bundleID) else { return .failure(.topicDisallowed) }
        }
        return .success((topic, bundleID))
    }

    func headers(_ request: ProviderRequest, pushType: PushType) -> Result<(Int, Int64?, String?), ProviderReason> {
        var priority = 10
        if let p = request.header("apns-priority") {
            guard let value = Int(p), [10, 5, 1].contains(value) else { return .failure(.badPriority) }
            priority = value
        } else if pushType == .background {
            priority = 5  // Apple's rule for background pushes; an absent header is taken as meaning it
        }
        if pushType == .background && priority != 5 { return .failure(.badPriority) }
        var expiration: Int64?
        if let e = request.header("apns-expiration") {
            guard let value = Int64(e), value >= 0 else { return .failure(.badExpirationDate) }
            expiration = value
        }
        let collapseID = request.header("apns-collapse-id")
        if let collapseID, collapseID.utf8.count > Self.collapseIDLimit { return .failure(.badCollapseId) }
        return .success((priority, expiration, collapseID))
    }

    /// The body: a JSON object within the push type's size; a background push wakes the app silently
    /// (`content-available: 1`, no alert, sound or badge). Most payloads are checked by a scan that
    /// builds nothing and go on as sent (nil); the others are parsed once, here.
    func payload(_ body: [UInt8], pushType: PushType) -> Result<JSONValue?, ProviderReason> {
        guard !body.isEmpty else { return .failure(.payloadEmpty) }
        guard body.count <= pushType.payloadLimit else { return .failure(.payloadTooLarge) }
        if pushType != .background && JSONText.isEmbeddableObject(body, withObjectAt: "aps") { return .success(nil) }
        guard let json = try? JSONValue.parse(String(decoding: body, as: UTF8.self)), json.objectValue != nil else {
            return .failure(.payloadEmpty)
        }
        if pushType == .background {
            let aps = json["aps"]
            guard aps?["content-available"]?.intValue == 1,
                  aps?["alert"] == nil, aps?["sound"] == nil, aps?["badge"] == nil else { return .failure(.invalidPushType) }
        }
        return .success(json)
    }
}
