import CCSEngine
import CCSProtocol
import PushDomain
import Hummingbird

/// What the APNs gateway did: `GET /emulator/v1/apns/notifications` (docs/admin-api.md).
extension AdminAPI {
    func addAPNsRoutes(to v1: RouterGroup<some RequestContext>) {
        v1.get("apns/notifications") { request, _ in
            let query = request.uri.queryParameters
            var event: APNsActivity.Event?
            if let e = query.get("event") {
                guard let named = APNsActivity.Event(rawValue: e) else {
                    throw APIError.badRequest("\"event\" must be one of accepted, rejected, delivered, feedback")
                }
                event = named
            }
            var after: Int64 = 0
            if let a = query.get("after") {
                guard let n = Int64(a), n >= 0 else { throw APIError.badRequest("\"after\" must be a sequence number ≥ 0") }
                after = n
            }
            var limit = 1000
            if let l = query.get("limit") {
                guard let n = Int(l), (1...10_000).contains(n) else { throw APIError.badRequest("\"limit\" must be 1…10000") }
                limit = n
            }
            let activity = self.engine.apnsActivity
            let entries = activity.entries(after: after, event: event, bundleID: query.get("bundle_id"), limit: limit)
            let counts = activity.counts
            return JSONResponse.make(.object([
                "notifications": .array(entries.map(Self.apnsEntryJSON)),
                "counts": .object(Dictionary(uniqueKeysWithValues: APNsActivity.Event.allCases.map {
                    ($0.rawValue, JSONValue.int(counts[$0] ?? 0))
                })),
                "kept": .int(Int64(activity.capacity)),
            ]))
        }
    }

    static func apnsEntryJSON(_ e: APNsActivity.Entry) -> JSONValue {
        var fields: [String: JSONValue] = [
            "sequence": .int(e.sequence), "at": .int(e.at), "event": .string(e.event.rawValue),
            "bundle_id": .string(e.bundleID), "device_token": .string(e.deviceToken),
            "identifier": .int(Int64(e.identifier)),
        ]
        if let c = e.command { fields["command"] = .int(Int64(c)) }
        if let s = e.status { fields["status"] = .int(Int64(s)) }
        if let p = e.priority { fields["priority"] = .int(Int64(p)) }
        if let x = e.expiry { fields["expiry"] = .int(Int64(x)) }
        if let p = e.payload { fields["payload"] = p }
        return .object(fields)
    }
}
