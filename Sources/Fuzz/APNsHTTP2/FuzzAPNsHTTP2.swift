#if FUZZING
import CLibFuzzer
#endif
import FuzzSupport
import APNsProviderAPI
import Crypto
import Foundation

/// The APNs HTTP/2 provider API's checks of what a provider sends: the path, the provider token (the
/// JWT reader and verifier), the connection's authorization, and the request validator. The input is
/// `METHOD PATH\nname: value\n…\n\nBODY`; a `authorization` header goes through a connection with one
/// known key, the rest through the validator with token and with certificate authorization.
enum Target {
    static let key = ProviderKey(keyID: "KEY0000001", teamID: "TEAM000001", topics: ["com.example.app"],
                                 environment: .sandbox, publicKey: P256.Signing.PrivateKey().publicKey)

    static func run(_ bytes: UnsafeRawBufferPointer) {
        let text = String(decoding: bytes, as: UTF8.self)
        let (head, body) = split(text)
        var lines = head.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let requestLine = lines.isEmpty ? [] : lines.removeFirst().split(separator: " ", maxSplits: 1).map(String.init)
        let headers = lines.compactMap { line -> (name: String, value: String)? in
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { return nil }
            return (name: line[..<colon].lowercased(), value: line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let request = ProviderRequest(method: requestLine.first ?? "", path: requestLine.dropFirst().first ?? "",
                                      headers: headers, body: Array(body.utf8))
        guard case .success(let token) = request.deviceToken() else { return }
        var connection = ProviderConnection(method: .token)
        _ = connection.authorize(request.header("authorization"), environment: ProviderEnvironment(authority: request.authority),
                                 nowSeconds: 1_800_000_000, keys: { $0 == key.keyID ? key : nil })
        let validator = ProviderRequestValidator()
        _ = validator.validate(request, deviceToken: token, authorization: .token(key), makeID: { "ID" })
        _ = validator.validate(request, deviceToken: token, authorization: .certificate(bundleID: "com.example.app"),
                               makeID: { "ID" })
    }

    static func split(_ text: String) -> (head: String, body: String) {
        guard let range = text.range(of: "\n\n") else { return (text, "") }
        return (String(text[..<range.lowerBound]), String(text[range.upperBound...]))
    }
}

#if FUZZING
/// The entry SwiftPM links this executable with, handing over to libFuzzer's driver.
@_cdecl("fuzz_apns_http2_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { data, size in
        Target.run(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    }
}
#else
@main
enum Replay {
    static func main() {
        exit(FuzzInput.replay(Array(CommandLine.arguments.dropFirst()), Target.run))
    }
}
#endif
