import Foundation
import Locking
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The app server under test, started from a shell command line with the runner's environment
/// (docs/conformance.md, "The contract"), in a process group of its own so that stopping it also
/// stops whatever the command started (`cd x && python3 app.py`, a wrapper script). Its output goes
/// to a log file for the report. An HTTP app server reads the runner's send requests from its stdin,
/// a pipe; a CCS one gets /dev/null.
final class AppServerProcess: Sendable {
    let pid: pid_t
    let logURL: URL
    /// The write end of the stdin pipe (HTTP app servers); closed by `stop`.
    let stdinWriter: Locked<Int32?>
    /// The exit status once it has been reaped.
    let exited = Locked<Int32?>(nil)

    struct SpawnError: Error, CustomStringConvertible {
        var code: Int32
        var description: String { "could not start the app server: \(String(cString: strerror(code)))" }
    }

    init(command: String, environment: [String: String], logURL: URL, stdinPipe: Bool = false) throws {
        self.logURL = logURL
        var pipeEnds: [Int32] = [-1, -1]
        if stdinPipe {
            // Close-on-exec on both ends: the child's fd 0 is a dup2 copy (without the flag), and no
            // other child the runner starts inherits the write end (which would hide EOF).
            guard pipe(&pipeEnds) == 0 else { throw SpawnError(code: errno) }
            for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            // A write to an app server that has exited must fail with EPIPE, not end the runner.
            signal(SIGPIPE, SIG_IGN)
        }
        defer { if stdinPipe { close(pipeEnds[0]) } }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        var files = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&files)
        defer { posix_spawn_file_actions_destroy(&files) }
        if stdinPipe {
            posix_spawn_file_actions_adddup2(&files, pipeEnds[0], 0)
        } else {
            posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_addopen(&files, 1, logURL.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&files, 1, 2)
        let env = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let words: [String] = ["/bin/sh", "-c", command]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, "/bin/sh", &files, &attributes, argv, envp)
        guard rc == 0 else {
            if stdinPipe { close(pipeEnds[1]) }
            throw SpawnError(code: rc)
        }
        pid = child
        stdinWriter = Locked(stdinPipe ? pipeEnds[1] : nil)
    }

    /// Writes one line to the app server's stdin; false when it has no pipe or no longer reads it.
    func writeLine(_ line: String) -> Bool {
        stdinWriter.withLock { fd in
            guard let fd else { return false }
            var bytes = Array((line + "\n").utf8)[...]
            while !bytes.isEmpty {
                let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { return false }
                bytes = bytes.dropFirst(n)
            }
            return true
        }
    }

    /// Reaps it if it has exited (never blocks).
    var isRunning: Bool {
        exited.withLock { status in
            guard status == nil else { return false }
            var raw: Int32 = 0
            guard waitpid(pid, &raw, WNOHANG) == pid else { return true }
            status = Self.exitCode(raw)
            return false
        }
    }

    var exitStatus: Int32 { exited.withLock { $0 } ?? -1 }

    static func exitCode(_ raw: Int32) -> Int32 {
        // WIFEXITED / WEXITSTATUS, WTERMSIG: the C macros are not imported into Swift.
        (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
    }

    /// SIGTERM to the group, up to 5 s to exit, then SIGKILL.
    func stop() async {
        stdinWriter.withLock { fd in
            if let open = fd { close(open) }
            fd = nil
        }
        guard isRunning else { return }
        kill(-pid, SIGTERM)
        for _ in 0..<250 where isRunning {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if isRunning {
            kill(-pid, SIGKILL)
            exited.withLock { status in
                var raw: Int32 = 0
                if waitpid(pid, &raw, 0) == pid { status = Self.exitCode(raw) }
            }
        }
        // Anything the command left behind in its group goes too.
        kill(-pid, SIGKILL)
    }

    /// The end of what it printed, for a failed scenario's report.
    func logTail(_ bytes: Int = 4000) -> String {
        guard let data = try? Data(contentsOf: logURL) else { return "" }
        return String(decoding: data.suffix(bytes), as: UTF8.self)
    }
}
