import FuzzSupport
import FCMHTTP
import Foundation

/// The FCM HTTP request bodies: legacy JSON and form, v1, device-group management.
enum Target {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        // The first byte picks the API; the rest is its body.
        guard let first = bytes.first else { return }
        let kinds = RequestBodyDecoders.Kind.allCases
        RequestBodyDecoders.decode(kinds[Int(first) % kinds.count],
                                   String(decoding: UnsafeRawBufferPointer(rebasing: bytes.dropFirst()), as: UTF8.self))
    }
}

#if FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    Target.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
#else
exit(FuzzInput.replay(Array(CommandLine.arguments.dropFirst()), Target.run))
#endif
