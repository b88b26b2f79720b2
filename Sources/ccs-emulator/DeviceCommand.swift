import ArgumentParser
import CCSProtocol
import PushDomain
import DeviceSimulator
import Foundation
import NIOCore
import NIOPosix

struct Device: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a simulated device: register, connect, print what arrives.",
        discussion: """
            Prints one JSON line per event on stdout: registered (token, device_id, …), connected, message \
            (the message as the app sees it, and "view": what the platform shows; ACKed on arrival), \
            notification (shown by the system: the app is in the background); a message whose view names \
            an image is printed once the image is downloaded or given up, with "image": {url, status, bytes, \
            content_type, shown, reason} (see docs/platforms.md), deleted_messages, sent / send_error (upstream), state, offline, \
            uninstalled, groups, token, disconnected, error; with --push-service emulator, push (a Web Push \
            message decrypted with the subscription's key: data, and the notification a service worker would \
            show) or push_error, and the registered event carries the PushSubscription (docs/web-push.md).

            Reads JSON-line commands on stdin: {"go":"offline"|"online"|"foreground"|"background"|"idle"|\
            "active"|"uninstall"|"reinstall"}, {"tap":"<message_id>"} (open a notification from the tray), \
            {"upstream":{"data":{…},"message_id":…,"to":…,"time_to_live":…}} (to defaults to the first \
            sender; a device group's notification_key sends to the group's sender; while offline up to 20 \
            upstream messages wait and go out on reconnect), {"subscribe":"<topic>"} / {"unsubscribe":"<topic>"} \
            (as the app's subscribeToTopic; answered with a subscribed / unsubscribed event), {"show":"groups"} \
            (the device groups the device belongs to), {"refresh":"token"} (a token refresh: prints token \
            with the new token and previous_token; the earlier tokens still reach the app, and answers to them \
            name the new one as the canonical registration id). End of input: \
            disconnect and exit 0. If the emulator cannot be reached (or --emulator is not its HTTP port), \
            prints one error line and exits 1. With --platform ios --apns the app also registers for APNs \
            (the registered event shows its apns_token) and each notification from the APNs gateway prints an \
            apns event: the payload, alert, badge, sound, content_available and mutable_content (docs/apns.md). \
            See docs/device-protocol.md.
            """)

    @Option(help: "The emulator's HTTP base URL: its --http-port, not the CCS or device port.")
    var emulator = "http://127.0.0.1:8080"
    @Option(help: "The app's package name, iOS bundle id or web app id (not needed with --token).")
    var app: String?
    @Option(name: .customLong("sender"), help: "A sender ID the app registers for (repeat for several, up to 100).")
    var senders: [String] = []
    @Option(help: "android, ios or web. A web device registers with a generated push subscription unless --subscription is given.")
    var platform = "android"
    @Option(help: "web: the browser's PushSubscription JSON ({\"endpoint\":…,\"keys\":{\"p256dh\":…,\"auth\":…}}).")
    var subscription: String?
    @Option(help: "web: \"emulator\" subscribes with the emulator as the browser's push service (a fresh key pair and auth secret; prints the PushSubscription, decrypts each Web Push message into a push event; docs/web-push.md).")
    var pushService: String?
    @Option(help: "web, --push-service emulator: the applicationServerKey (VAPID public key, base64url) the subscription accepts alone.")
    var applicationServerKey: String?
    @Option(help: "web, --push-service emulator: the endpoint's form: fcm (https://fcm.googleapis.com/fcm/send/…, the default), wp (…/wp/…) or local (this emulator's http URL).")
    var endpointForm = "fcm"
    @Option(help: "Seconds an image download may take (0.1 to 120; default: the platform's, Android 5, iOS and web 30).")
    var imageTimeout: Double?
    @Option(help: "Reuse this existing registration instead of registering anew.")
    var token: String?
    @Flag(help: "iOS only: also register for APNs (a device token for the app's bundle id, --app).")
    var apns = false

    func validate() throws {
        if token == nil && (app == nil || (senders.isEmpty && !apns && pushService == nil)) {
            throw ValidationError("give --app and at least one --sender or --apns (or --token)")
        }
        if apns && platform != "ios" { throw ValidationError("--apns needs --platform ios") }
        if !["android", "ios", "web"].contains(platform) { throw ValidationError("--platform is android, ios or web") }
        if let t = imageTimeout, !(t >= 0.1 && t <= 120) { throw ValidationError("--image-timeout is 0.1 to 120 seconds") }
        if let subscription {
            guard platform == "web" else { throw ValidationError("--subscription is for --platform web") }
            guard let json = try? JSONValue.parse(subscription), case .success = WebPushSubscription.parse(json) else {
                throw ValidationError("--subscription must be a PushSubscription JSON with an https endpoint and keys p256dh, auth")
            }
        }
        try validateWebPush()
        if HTTPJSONClient.parseBaseURL(emulator) == nil { throw ValidationError("--emulator must look like http://HOST:PORT") }
    }

    func validateWebPush() throws {
        if let pushService {
            guard pushService == "emulator" else { throw ValidationError("--push-service takes emulator") }
            guard platform == "web" else { throw ValidationError("--push-service is for --platform web") }
            guard subscription == nil else { throw ValidationError("give --push-service emulator or --subscription, not both") }
            guard ["fcm", "wp", "local"].contains(endpointForm) else { throw ValidationError("--endpoint-form is fcm, wp or local") }
        } else if applicationServerKey != nil {
            throw ValidationError("--application-server-key needs --push-service emulator")
        }
    }

    func run() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let (host, port) = HTTPJSONClient.parseBaseURL(emulator)!
        var session = DeviceSession(http: HTTPJSONClient(host: host, port: port, group: group), group: group, host: host,
                                    baseURL: emulator, imageTimeout: imageTimeout.map { .nanoseconds(Int64($0 * 1e9)) },
                                    output: Output.line)
        var failed = false
        do {
            let subscriptionJSON = try subscription.map { try JSONValue.parse($0) }
            try await session.start(token: token, app: app ?? "", senders: senders, platform: platform,
                                    subscription: subscriptionJSON, apns: apns,
                                    pushService: pushService.map { _ in
                                        WebPushServiceRequest(applicationServerKey: applicationServerKey, endpointForm: endpointForm)
                                    })
            for await command in StdinCommands().stream {
                do { try await session.handle(command) } catch {
                    session.emitError(error)
                }
            }
            await session.stop()
        } catch {
            session.emitError(error)
            failed = true
        }
        await session.images?.shutdown()
        try? await group.shutdownGracefully()
        if failed { throw ExitCode(1) }
    }
}

/// Reads JSON-line commands from stdin on a thread of its own.
final class StdinCommands: Sendable {
    let stream: AsyncStream<DeviceCommandLine>

    init() {
        let (stream, continuation) = AsyncStream.makeStream(of: DeviceCommandLine.self)
        self.stream = stream
        let thread = Thread {
            while let line = readLine() {
                if let command = DeviceCommandLine(line: line) { continuation.yield(command) }
            }
            continuation.finish()
        }
        thread.start()
    }
}
