#if FUZZING
import CLibFuzzer
#endif
import FuzzSupport
import Foundation
import XMLStreaming

/// The XML stream parser, fed the input in pieces.
enum Target {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        // Post-auth limits or pre-auth ones, and the bytes in the pieces the network might deliver.
        let parser = XMLStreamParser(limits: (bytes.first ?? 0) & 1 == 0 ? .postAuth : .preAuth)
        var events: [XMLStreamEvent] = []
        for piece in FuzzInput.pieces(bytes) {
            do {
                try parser.feed(piece, into: &events)
                events.removeAll(keepingCapacity: true)
                if parser.isPaused { parser.reset() }
            } catch {
                return  // an error ends the stream, as on a connection
            }
        }
    }
}

#if FUZZING
/// The entry SwiftPM links this executable with, handing over to libFuzzer's driver.
@_cdecl("fuzz_xml_stream_main")
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
