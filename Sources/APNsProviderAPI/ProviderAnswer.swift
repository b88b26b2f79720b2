import PushDomain

/// What one stream is answered: a status, Apple's headers and, for an error, `{"reason": …}` (with
/// `timestamp` for 410).
public struct ProviderAnswer: Sendable, Equatable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: String?

    public static func == (a: Self, b: Self) -> Bool {
        a.status == b.status && a.body == b.body && a.headers.map(\.name) == b.headers.map(\.name)
            && a.headers.map(\.value) == b.headers.map(\.value)
    }

    /// 200: `apns-id`, and on the sandbox host `apns-unique-id` (the id the delivery log knows it by).
    public static func accepted(apnsID: String, uniqueID: String?) -> ProviderAnswer {
        var headers = [(name: "apns-id", value: apnsID)]
        if let uniqueID { headers.append((name: "apns-unique-id", value: uniqueID)) }
        return ProviderAnswer(status: 200, headers: headers, body: nil)
    }

    /// An error: the reason's status, and `timestamp` (ms since the epoch) when the token stopped
    /// being valid for the topic (410).
    public static func refused(_ reason: ProviderReason, apnsID: String?, timestampMillis: Int64? = nil) -> ProviderAnswer {
        var body = JSONObjectWriter()
        body.add("reason", reason.rawValue)
        if let timestampMillis, reason.status == 410 { body.add("timestamp", timestampMillis) }
        var headers: [(name: String, value: String)] = [("content-type", "application/json")]
        if let apnsID { headers.insert((name: "apns-id", value: apnsID), at: 0) }
        return ProviderAnswer(status: reason.status, headers: headers, body: body.finished())
    }
}
