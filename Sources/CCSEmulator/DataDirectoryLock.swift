import Foundation
import Locking
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An exclusive `flock` on DATA_DIR/lock, which also holds the owner's PID. Two servers on one data
/// directory would each keep their own picture of who is online: a message the second one ACKs for a
/// device connected to the first would sit in the store until that device reconnects.
final class DataDirectoryLock: Sendable {
    let descriptor: Int32
    private let held = Locked(true)
    /// Why the lock is not held although nobody else holds it (a file system without `flock`).
    let problem: String?

    private init(descriptor: Int32, problem: String? = nil) {
        self.descriptor = descriptor
        self.problem = problem
    }

    static func acquire(dataDirectory: String) throws -> DataDirectoryLock {
        let path = dataDirectory + "/lock"
        // No O_TRUNC: the PID in the file belongs to whoever holds the lock, maybe not us.
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw ConfigurationError("cannot open \(path): \(String(cString: strerror(errno)))")
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let failure = errno
            guard failure == EWOULDBLOCK else {
                // No flock here (some network file systems): run unprotected rather than not at all.
                return DataDirectoryLock(descriptor: fd, problem: "cannot lock \(path): \(String(cString: strerror(failure)))")
            }
            let holder = readPID(fd)
            close(fd)
            let who = holder.map { "PID \($0)" } ?? "another process"
            throw ConfigurationError("data dir \(dataDirectory) is in use by \(who) (another ccs-emulator serve?); "
                                     + "stop it, or pass another --data-dir")
        }
        let pid = Array("\(getpid())\n".utf8)
        // Best effort: without the PID a second server is still refused, only told less.
        _ = ftruncate(fd, 0)
        _ = pwrite(fd, pid, pid.count, 0)
        return DataDirectoryLock(descriptor: fd)
    }

    private static func readPID(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = pread(fd, &buffer, buffer.count, 0)
        guard n > 0 else { return nil }
        return Int32(String(decoding: buffer[..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Releases the lock (closing the last descriptor does); the emulator's last step of a stop.
    func release() {
        let wasOpen = held.withLock { o -> Bool in defer { o = false }; return o }
        if wasOpen { close(descriptor) }
    }

    deinit { release() }
}
