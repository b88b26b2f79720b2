import PushDomain

/// The `push` event a service worker gets (`event.data.text()`), and the notification it would show
/// if the payload is one: `{"notification":{"title":…}}` (Angular's and declarative Web Push's
/// shape) or a top-level `{"title":…,"body":…}`. The worker's own code decides in a real browser;
/// this is what the common service workers do.
public enum PushEventView {
    public static func json(plaintext: [UInt8], hasPayload: Bool) -> JSONValue {
        guard hasPayload else { return .object(["data": .null]) }
        guard let text = String(validating: plaintext, as: UTF8.self) else {
            return .object(["data": .null, "data_base64url": .string(Base64URL.encode(plaintext)),
                            "note": .string("the payload is not UTF-8 text (event.data.text() would replace bytes)")])
        }
        var fields: [String: JSONValue] = ["data": .string(text)]
        if let notification = notification(in: text) { fields["notification"] = notification }
        return .object(fields)
    }

    static func notification(in text: String) -> JSONValue? {
        guard case .object(let o)? = try? JSONValue.parse(text) else { return nil }
        if case .object(let n)? = o["notification"], n["title"]?.stringValue != nil { return .object(n) }
        if o["title"]?.stringValue != nil {
            var n: [String: JSONValue] = [:]
            for key in ["title", "body", "icon", "image", "badge", "tag", "data", "actions"] where o[key] != nil { n[key] = o[key] }
            return .object(n)
        }
        return nil
    }
}
