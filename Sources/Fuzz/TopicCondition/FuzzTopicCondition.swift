#if FUZZING
import CLibFuzzer
#endif
import FuzzSupport
import PushDomain
import Foundation

/// The topic-condition parser.
enum Target {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        _ = try? TopicCondition.parse(String(decoding: bytes, as: UTF8.self))
    }
}

#if FUZZING
/// The entry SwiftPM links this executable with, handing over to libFuzzer's driver.
@_cdecl("fuzz_topic_condition_main")
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
