@testable import CCSProtocol

typealias DecodeResult = Result<AppServerStanza, AppServerStanzaError>

extension Result where Success == AppServerStanza, Failure == AppServerStanzaError {
    var downstream: DownstreamMessage? {
        if case .success(.downstream(let message)) = self { return message }
        return nil
    }

    var nack: Nack? {
        if case .failure(.nack(let nack)) = self { return nack }
        return nil
    }

    var stanzaErrorText: String? {
        if case .failure(.stanzaError(let text)) = self { return text }
        return nil
    }
}

func decode(_ text: String) -> DecodeResult {
    AppServerStanzaDecoder.decode(text)
}

/// A downstream JSON object with `to` and `message_id` plus `extra` (raw JSON members).
func downstreamJSON(_ extra: String = "", to: String = "tok") -> String {
    #"{"to":"\#(to)","message_id":"m-1"\#(extra.isEmpty ? "" : "," + extra)}"#
}

/// The `error_description` of the INVALID_JSON NACK for `text`, or a marker if it was not one.
func invalidJSONDescription(_ text: String) -> String {
    let result = decode(text)
    guard let nack = result.nack else { return "not a NACK: \(result)" }
    guard nack.code == .invalidJSON else { return "NACK \(nack.code.rawValue): \(nack.description)" }
    return nack.description
}
