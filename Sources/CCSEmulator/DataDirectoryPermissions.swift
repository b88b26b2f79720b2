import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The data directory holds server keys, device secrets, service-account keys and message payloads:
/// other local users must not read it, and must not be able to swap a file in it for a link to one of
/// theirs (docs/hardening.md, "Threat model").
///
/// - Everything the process creates from here on is 0600 (files) and 0700 (directories): the umask
///   is set before the first file is made, so SQLite's database, WAL and shared-memory files, the
///   journal, the CA and the keys are private from their first byte.
/// - An existing directory is tightened to 0700 and its files to 0600 (a data directory made by an
///   older version was 0755 with 0644 files).
/// - A directory that another user may write to is refused, and so is a database file that is a
///   symbolic link (opening it would follow the link).
enum DataDirectoryPermissions {
    static func secure(_ dataDir: String, logger: Logger) throws {
        umask(0o077)
        var st = stat()
        guard lstat(dataDir, &st) == 0 else {
            throw ConfigurationError("--data-dir \(dataDir): \(String(cString: strerror(errno)))")
        }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            throw ConfigurationError("--data-dir \(dataDir) is not a directory (a symbolic link is refused too)")
        }
        if st.st_uid != getuid() {
            throw ConfigurationError("--data-dir \(dataDir) belongs to another user (uid \(st.st_uid)): use a directory of your own")
        }
        if st.st_mode & 0o077 != 0 {
            guard chmod(dataDir, 0o700) == 0 else {
                throw ConfigurationError("--data-dir \(dataDir) is open to other users (mode \(String(st.st_mode & 0o777, radix: 8))) and cannot be made 0700: \(String(cString: strerror(errno)))")
            }
            logger.warning("--data-dir \(dataDir) was open to other users (mode \(String(st.st_mode & 0o777, radix: 8))); it is 0700 now")
        }
        for sub in ["", "/tls", "/credentials"] { tightenFiles(in: dataDir + sub) }
        for name in Emulator.databaseFiles {
            let path = dataDir + "/" + name
            if lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFLNK {
                throw ConfigurationError("\(path) is a symbolic link: the emulator opens only its own files (remove it)")
            }
        }
    }

    /// Files of one directory to 0600, directories below it to 0700; links are left alone (and not
    /// followed: chmod would change their target).
    private static func tightenFiles(in directory: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for name in names {
            let path = directory + "/" + name
            var st = stat()
            guard lstat(path, &st) == 0, st.st_uid == getuid(), st.st_mode & 0o077 != 0 else { continue }
            switch st.st_mode & S_IFMT {
            case S_IFREG: _ = chmod(path, 0o600)
            case S_IFDIR: _ = chmod(path, 0o700)
            default: continue
            }
        }
    }
}
