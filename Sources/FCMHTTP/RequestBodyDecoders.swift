import PushDomain

/// Every request-body decoder of the FCM HTTP APIs, by kind: the entry the fuzzers use
/// (Sources/Fuzz/HTTPBodies), which see only public API. Nothing else calls it.
public enum RequestBodyDecoders {
    public enum Kind: UInt8, CaseIterable, Sendable {
        case legacyJSON, legacyForm, v1, deviceGroup, iidBatch
    }

    /// Decodes `text` as a body of that kind; true when it was accepted.
    @discardableResult
    public static func decode(_ kind: Kind, _ text: String) -> Bool {
        switch kind {
        case .legacyJSON:
            if case .success = LegacyMessageDecoder.decodeJSON(text, messageID: "fuzz") { return true }
        case .legacyForm:
            if case .success = LegacyMessageDecoder.decodeForm(text, messageID: "fuzz") { return true }
        case .v1:
            guard let body = try? JSONValue.parse(text) else { return false }
            if case .success = V1MessageDecoder.decode(body, messageID: "fuzz") { return true }
        case .deviceGroup:
            if case .success = FCMHTTPAPI.decodeGroupOperation(text) { return true }
        case .iidBatch:
            if case .success = FCMHTTPAPI.decodeIIDBatch(text) { return true }
        }
        return false
    }
}
