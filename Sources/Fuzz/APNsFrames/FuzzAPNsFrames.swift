#if FUZZING
import CLibFuzzer
#endif
import FuzzSupport
import APNsGateway
import Foundation
import NIOCore

/// The APNs binary interface: commands 0, 1 and 2 in any split.
enum Target {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        // The bytes in pieces, every notification decoded until the decoder waits or refuses.
        var decoder = APNsFrameDecoder(payloadLimit: (bytes.first ?? 0) & 1 == 0 ? 2048 : 256)
        for piece in FuzzInput.pieces(bytes) {
            decoder.append(ByteBuffer(bytes: piece))
            while let outcome = decoder.next() {
                if case .rejected = outcome { return }  // the gateway closes the connection here
            }
        }
    }
}

#if FUZZING
/// The entry SwiftPM links this executable with, handing over to libFuzzer's driver.
@_cdecl("fuzz_apns_frames_main")
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
