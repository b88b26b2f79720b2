import FuzzSupport
import CCSProtocol
import Foundation

/// The topic-condition parser.
enum Target {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        _ = try? TopicCondition.parse(String(decoding: bytes, as: UTF8.self))
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
