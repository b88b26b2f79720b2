#if FUZZING
import CLibFuzzer
#endif
import FuzzSupport
import Foundation
import PushDomain

/// The JSON parser every front end uses, and the check that lets a payload through without it
/// (`JSONText`): whatever that check passes, the parser must accept with an object under the key.
enum Target {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        let parsed = try? JSONValue.parse(String(decoding: bytes, as: UTF8.self))
        if JSONText.isEmbeddableObject(bytes.assumingMemoryBound(to: UInt8.self), withObjectAt: "aps") {
            precondition(parsed?["aps"]?.objectValue != nil, "JSONText passed what the parser refuses")
        }
    }
}

#if FUZZING
/// The entry SwiftPM links this executable with, handing over to libFuzzer's driver.
@_cdecl("fuzz_json_main")
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
