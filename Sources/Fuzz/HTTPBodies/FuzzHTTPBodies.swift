#if FUZZING
import CLibFuzzer
#endif
import FuzzSupport
import FCMHTTP
import Foundation

/// The FCM HTTP request bodies: legacy JSON and form, v1, device-group management, Instance ID batches.
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
/// The entry SwiftPM links this executable with, handing over to libFuzzer's driver.
@_cdecl("fuzz_http_bodies_main")
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
