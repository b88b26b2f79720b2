import FuzzSupport
import CCSProtocol
import Foundation

/// The app-server stanza decoder: the JSON inside <gcm> and downstream validation.
enum Target {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        _ = AppServerStanzaDecoder.decode(String(decoding: bytes, as: UTF8.self))
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
