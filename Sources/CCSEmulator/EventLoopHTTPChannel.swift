import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore

/// An HTTP listener's connections whose send routes run on the connection's own event loop.
///
/// Hummingbird runs each connection as a task on Swift's global executor: every request then crosses
/// threads twice (the event loop hands the request to a pool thread, the pool thread hands the
/// response back), and every crossing wakes a sleeping thread. For the send routes, whose work is
/// the engine's (it takes its lock and answers through a callback, never blocks), those crossings
/// were measured at about a quarter of the server's CPU per request (docs/benchmarks.md). So each
/// connection's task prefers its event loop as task executor, and requests for any other route — the
/// admin API's store reads, RSA signing and verification, exports — move back to the global
/// executor, where blocking work belongs.
struct EventLoopHTTPChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        base.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await withTaskExecutorPreference(EventLoopTaskExecutor(value.channel.eventLoop)) {
            await base.handle(value: value, logger: logger)
        }
    }
}

/// The routes that run on the event loop: the message sends (they never block) and the bench's
/// no-op route, which measures the same server as they run on.
enum LoopRoutes {
    static func runsOnEventLoop(method: HTTPRequest.Method, path: String) -> Bool {
        guard method == .post else { return false }
        if path == "/fcm/send" || path == "/gcm/send" || path == "/emulator/bench/noop" { return true }
        return path.hasPrefix("/v1/projects/") && path.hasSuffix("/messages:send")
    }

    /// `responder`, with requests for every other route moved off the event loop.
    static func responder(_ responder: @escaping HTTPChannelHandler.Responder) -> HTTPChannelHandler.Responder {
        { request, writer, channel in
            if runsOnEventLoop(method: request.method, path: request.uri.path) {
                try await responder(request, writer, channel)
                return
            }
            var taken: ResponseWriter? = consume writer
            try await withTaskExecutorPreference(globalConcurrentExecutor) {
                try await responder(request, taken.take()!, channel)
            }
        }
    }
}

/// A task executor that runs jobs on one NIO event loop.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
