import Foundation

/// What every fuzz target shares: the libFuzzer entry calls a target's `run` with each input; without
/// the fuzzer (`-D FUZZING` unset: the normal build) the same executable replays files instead, so that
/// the seed corpora and every crash reproducer under Fixtures/fuzz/ run as regression tests.
public enum FuzzInput {
    /// `fuzz-x FILE_OR_DIR...`: runs `body` on every file; prints how many. A crash ends the process
    /// (the reproducer is the file named last on stderr).
    public static func replay(_ arguments: [String], _ body: (UnsafeRawBufferPointer) -> Void) -> Int32 {
        var files: [String] = []
        for path in arguments {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("no such file or directory: \(path)\n".utf8))
                return 2
            }
            if isDirectory.boolValue {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
                files += names.filter { !$0.hasPrefix(".") }.sorted().map { path + "/" + $0 }
            } else {
                files.append(path)
            }
        }
        for file in files {
            FileHandle.standardError.write(Data("running \(file)\n".utf8))
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            data.withUnsafeBytes { body($0) }
        }
        print("\(files.count) inputs, no crash")
        return 0
    }

    /// Split points derived from the input itself (so a crash reproduces from its file alone): the
    /// first byte chooses piece sizes of 1 to 16 bytes, cycling through the following bytes.
    public static func pieces(_ bytes: UnsafeRawBufferPointer) -> [UnsafeRawBufferPointer] {
        guard let first = bytes.first else { return [] }
        let body = UnsafeRawBufferPointer(rebasing: bytes.dropFirst())
        if first & 0x80 == 0 { return [body] }  // half the inputs whole
        var pieces: [UnsafeRawBufferPointer] = []
        var index = 0
        var step = UInt(first & 0x0F)
        while index < body.count {
            let size = 1 + Int(step % 16)
            let end = min(body.count, index + size)
            pieces.append(UnsafeRawBufferPointer(rebasing: body[index..<end]))
            step = step &* 31 &+ UInt(body[index])
            index = end
        }
        return pieces
    }
}
