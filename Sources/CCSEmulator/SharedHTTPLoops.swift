import Locking
import NIOPosix

/// The event loops the HTTP servers run on: one group per process, made by the first emulator with
/// its `--threads`, and never shut down. Hummingbird ends a server's graceful shutdown in a task of
/// its own that can still touch the server's loop after `run()` returned; on a loop of the emulator's
/// own group, which is shut down at the end of a stop, NIO printed "Cannot schedule tasks on an
/// EventLoop that has already shut down". Later emulators in the same process (the conformance
/// runner's, the tests') share the group.
enum SharedHTTPLoops {
    private static let shared = Locked<MultiThreadedEventLoopGroup?>(nil)

    static func group(threads: Int) -> MultiThreadedEventLoopGroup {
        shared.withLock { group in
            if let group { return group }
            let made = MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads))
            group = made
            return made
        }
    }
}
