import HTTPRequestBody
import Hummingbird
import NIOCore

/// Routes that exist only for `ccs-emulator bench` (`EmulatorConfiguration.benchRoutes`, the hidden
/// `serve --bench-routes`): the HTTP server's own ceiling, measured in the same run as the FCM routes.
enum BenchRoutes {
    static let answer = ByteBuffer(string: "{}\n")

    static func add(to router: Router<some RequestContext>) {
        // Reads the body as the FCM routes do (up to the same 1 MiB), then answers without any work.
        router.post("emulator/bench/noop") { request, _ in
            _ = try await request.collectBody(limit: 1 << 20)
            return Response(status: .ok, headers: [.contentType: "application/json; charset=UTF-8"],
                            body: .init(byteBuffer: answer))
        }
    }
}
