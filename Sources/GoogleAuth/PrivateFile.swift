import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file that holds a secret (a private key, a signing secret), written so that nobody else can read
/// it or make us write through a link: created new (`O_EXCL`: a file or a symbolic link already at
/// the path is an error, never followed or truncated), mode 0600 from the first byte.
enum PrivateFile {
    static func create(atPath path: String, contents: Data) throws(CredentialsError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw CredentialsError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        let written = contents.withUnsafeBytes { bytes -> Int in
            var offset = 0
            while offset < bytes.count {
                let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0 { if errno == EINTR { continue } else { return -1 } }
                offset += n
            }
            return offset
        }
        guard written == contents.count, fsync(fd) == 0 else {
            unlink(path)
            throw CredentialsError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}
