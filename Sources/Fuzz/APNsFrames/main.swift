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
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    Target.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
#else
exit(FuzzInput.replay(Array(CommandLine.arguments.dropFirst()), Target.run))
#endif
