import FuzzSupport
import Foundation
import PushDomain

/// The JSON parser every front end uses.
enum Target {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        _ = try? JSONValue.parse(String(decoding: bytes, as: UTF8.self))
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
