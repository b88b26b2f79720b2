import CCSProtocol
import PushDomain
import Foundation
import NIOCore
import WebPushService

/// The simulated device's life: its registration, its connection, its offline upstream cache.
public struct DeviceSession {
    /// The client library keeps at most this many upstream messages while offline.
    static let maxCachedUpstream = 20

    let http: HTTPJSONClient
    let group: any EventLoopGroup
    let host: String
    /// `--emulator` as given, for error texts.
    let baseURL: String
    /// Where each event goes, one JSON line at a time (the `device` command: its stdout).
    let output: @Sendable (String) -> Void
    var devicePort = 0
    var caPEM = ""
    var credentials: DeviceCredentials?
    var connection: DeviceConnection?
    var cachedUpstream: [JSONValue] = []
    var upstreamCounter = 0
    /// `--image-timeout`, else the platform's own limit.
    let imageTimeout: TimeAmount?
    /// Made once the platform is known (registration or the stored record).
    public private(set) var images: NotificationImageLoader?
    /// A browser whose push service is the emulator: its subscription's keys, to decrypt each push.
    var webPushKeys: SubscriptionPrivateKeys?

    public init(http: HTTPJSONClient, group: any EventLoopGroup, host: String, baseURL: String, imageTimeout: TimeAmount? = nil,
                output: @escaping @Sendable (String) -> Void) {
        self.http = http
        self.group = group
        self.host = host
        self.baseURL = baseURL
        self.imageTimeout = imageTimeout
        self.output = output
    }

    func emit(_ fields: [String: JSONValue]) {
        Self.emit(fields, to: output)
    }

    static func emit(_ fields: [String: JSONValue], to output: @Sendable (String) -> Void) {
        output(JSONValue.object(fields).encoded())
    }

    /// An `error` event; NIO's errors are told in words ("connection refused"), not as structs.
    public func emitError(_ error: any Error) {
        let text = error is HTTPJSONClient.Failure || error is DeviceSessionError
            ? "\(error)" : ConnectionFailure.describe(error)
        emit(["event": .string("error"), "error": .string(text)])
    }

    public mutating func start(token: String?, app: String, senders: [String], platform: String, subscription: JSONValue?,
                               apns: Bool = false, pushService: WebPushServiceRequest? = nil) async throws {
        // The first request tells whether --emulator is the admin API at all: the CCS and device ports
        // speak TLS and hang up on plain HTTP, and a port where nothing listens refuses the connection.
        let info: JSONValue
        do { info = try await http.getJSON("/emulator/v1/info") } catch {
            let detail: String
            if let failure = error as? HTTPJSONClient.Failure {
                detail = "GET /emulator/v1/info answered HTTP \(failure.status)"
            } else if error is JSONParseError {
                detail = "GET /emulator/v1/info did not answer JSON"
            } else {
                detail = ConnectionFailure.describe(error)
            }
            throw DeviceSessionError("no emulator HTTP API at \(baseURL): is this the --http-port? (\(detail))")
        }
        guard let port = info["device_port"]?.intValue else {
            throw DeviceSessionError("no emulator HTTP API at \(baseURL): is this the --http-port? "
                                     + "(/emulator/v1/info has no device_port)")
        }
        devicePort = Int(port)
        caPEM = try await http.request(.GET, "/emulator/v1/ca.pem").body
        if let token {
            guard let c = DeviceCredentials(json: try await http.getJSON("/emulator/v1/devices/\(token)")) else {
                throw DeviceSessionError("unexpected device record")
            }
            credentials = c
            if c.platform == "web" { try await adoptServedSubscription(token: c.token) }
        } else if let pushService {
            var body: [String: JSONValue] = ["app": .string(app), "endpoint": .string(pushService.endpointForm)]
            if let sender = senders.first { body["sender"] = .string(sender) }
            if let key = pushService.applicationServerKey { body["application_server_key"] = .string(key) }
            try adoptSubscription(try await http.postJSON("/emulator/v1/web-push/subscriptions", .object(body)))
        } else {
            var body: [String: JSONValue] = [
                "app": .string(app), "senders": .array(senders.map { .string($0) }), "platform": .string(platform),
            ]
            if platform == "web" { body["subscription"] = subscription ?? Self.newSubscription() }
            if apns { body["apns"] = .bool(true) }
            try adoptRegistration(try await http.postJSON("/emulator/v1/devices", .object(body)))
        }
        if let c = credentials {
            var rules = ImageRules.forPlatform(c.platform)
            if let imageTimeout { rules.timeLimit = imageTimeout }
            images = NotificationImageLoader(group: group, rules: rules)
        }
        try await goOnline()
    }

    /// What a browser's `pushManager.subscribe()` gives, made up: an endpoint on FCM's push service,
    /// a P-256 point (0x04 ‖ 64 random bytes: only its form is checked) and a 16-byte auth secret.
    static func newSubscription() -> JSONValue {
        func base64URL(_ bytes: [UInt8]) -> String {
            Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        func random(_ n: Int) -> [UInt8] { (0..<n).map { _ in UInt8.random(in: 0 ... .max) } }
        return .object([
            "endpoint": .string("https://fcm.googleapis.com/fcm/send/" + base64URL(random(16))),
            "keys": .object(["p256dh": .string(base64URL([0x04] + random(64))), "auth": .string(base64URL(random(16)))]),
        ])
    }

    /// A registration reused by `--token`: if the emulator serves its subscription, the browser's keys.
    private mutating func adoptServedSubscription(token: String) async throws {
        let path = "/emulator/v1/web-push/subscriptions/" + Self.pathSegment(token)
        guard let json = try? await http.getJSON(path) else { return }  // a subscription of another push service
        webPushKeys = Self.privateKeys(json)
    }

    /// `POST /emulator/v1/web-push/subscriptions`'s answer: the registration, the keys, and the
    /// subscription printed as the browser's `toJSON()` gives it.
    private mutating func adoptSubscription(_ json: JSONValue) throws {
        try adoptRegistration(json, subscription: json["subscription"])
        guard let keys = Self.privateKeys(json) else { throw DeviceSessionError("the subscription answer has no usable private key") }
        webPushKeys = keys
    }

    static func privateKeys(_ json: JSONValue) -> SubscriptionPrivateKeys? {
        guard let subscription = json["subscription"], case .success(var parsed) = WebPushSubscription.parse(subscription),
              let privateKey = json["private_key"]?.stringValue else { return nil }
        parsed.serviceKeys = .init(privateKey: privateKey, applicationServerKey: nil)
        return SubscriptionPrivateKeys(parsed)
    }

    private mutating func adoptRegistration(_ json: JSONValue) throws {
        try adoptRegistration(json, subscription: nil)
    }

    private mutating func adoptRegistration(_ json: JSONValue, subscription: JSONValue?) throws {
        guard let c = DeviceCredentials(json: json) else { throw DeviceSessionError("unexpected registration answer") }
        credentials = c
        var fields: [String: JSONValue] = [
            "event": .string("registered"), "token": .string(c.token), "device_id": .string(c.deviceID),
            "app": .string(c.app), "senders": .array(c.senders.map { .string($0) }), "platform": .string(c.platform),
        ]
        if let apns = c.apnsToken { fields["apns_token"] = .string(apns) }
        if let subscription { fields["subscription"] = subscription }
        emit(fields)
    }

    public mutating func stop() async {
        if let connection { await connection.close() }
        connection = nil
    }

    private mutating func goOnline() async throws {
        // The server may have closed the connection (admin disconnect, a newer connection, a restart).
        if let c = connection, !c.isActive { connection = nil }
        guard connection == nil, let credentials else { return }
        do {
            let images = self.images
            let output = self.output
            let keys = self.webPushKeys
            connection = try await DeviceConnection.connect(host: host, port: devicePort, caPEM: caPEM,
                                                            credentials: credentials, group: group,
                                                            onEvent: { Self.print(event: $0, images: images, webPushKeys: keys, output: output) })
        } catch {
            throw DeviceSessionError("cannot connect to the device channel at \(host):\(devicePort): "
                                     + ConnectionFailure.describe(error))
        }
        for message in cachedUpstream { connection?.sendUpstream(message) }
        cachedUpstream.removeAll()
    }

    private static func print(event: DeviceEvent, images: NotificationImageLoader?, webPushKeys: SubscriptionPrivateKeys?,
                              output: @escaping @Sendable (String) -> Void) {
        if case .message(let message, _, _) = event, let webPushKeys, let pushed = PushedMessage(data: message["data"]) {
            return emit(pushEvent(pushed, message: message, keys: webPushKeys), to: output)
        }
        switch event {
        case .connected:
            output(#"{"event":"connected"}"#)
        case .message(let message, let toTray, let view?) where message["message_type"] == nil:
            var fields: [String: JSONValue] = ["event": .string(toTray ? "notification" : "message"), "message": message,
                                               "view": view]
            guard let images else { return emit(fields, to: output) }
            // The message is ACKed already; its event waits for the image, in a task of its own, so
            // that other messages are not held up.
            Task {
                if let outcome = await images.outcome(for: view) { fields["image"] = outcome.json }
                emit(fields, to: output)
            }
        case .message(let message, let toTray, _):
            switch message["message_type"]?.stringValue {
            case "deleted_messages"?:
                emit(["event": .string("deleted_messages"), "message": message], to: output)
            case "send_error"?:
                emit(["event": .string("send_error"), "message_id": message["message_id"] ?? .null,
                      "error": message["error"] ?? .null], to: output)
            case "apns"?:
                guard case .object(var fields) = APNsPresentation(message: message)?.json ?? .object([:]) else { return }
                fields["event"] = .string("apns")
                fields["message_id"] = message["message_id"] ?? .null
                fields["apns"] = message["apns"] ?? .null
                emit(fields, to: output)
            default:
                emit(["event": .string(toTray ? "notification" : "message"), "message": message], to: output)
            }
        case .upstreamAnswer(let answer):
            let sent = answer["message_type"]?.stringValue == "sent"
            var fields: [String: JSONValue] = ["event": .string(sent ? "sent" : "send_error"),
                                               "message_id": answer["message_id"] ?? .null]
            if !sent { fields["error"] = answer["error"] ?? .null }
            emit(fields, to: output)
        case .disconnected(let reason):
            var fields: [String: JSONValue] = ["event": .string("disconnected")]
            if let reason { fields["reason"] = .string(reason) }
            emit(fields, to: output)
        }
    }

    /// What the service worker's `push` handler sees: the payload decrypted with the browser's key.
    static func pushEvent(_ pushed: PushedMessage, message: JSONValue, keys: SubscriptionPrivateKeys) -> [String: JSONValue] {
        var fields: [String: JSONValue] = ["event": .string("push"), "message_id": message["message_id"] ?? .null]
        do {
            let plaintext = try pushed.decrypt(with: keys)
            if case .object(let view) = PushEventView.json(plaintext: plaintext, hasPayload: !pushed.body.isEmpty) {
                fields.merge(view) { _, new in new }
            }
        } catch {
            // The browser drops a message it cannot decrypt; the event says so instead of vanishing.
            fields["event"] = .string("push_error")
            fields["error"] = .string(error.description)
        }
        return fields
    }

    public mutating func handle(_ command: DeviceCommandLine) async throws {
        guard let token = credentials?.token else { return }
        switch command {
        case .go("offline"):
            // `offline` first, then the `disconnected` that closing the connection prints
            // (docs/device-protocol.md): the command's answer, then what it caused.
            emit(["event": .string("offline")])
            await stop()
        case .go("online"):
            try await goOnline()
        case .go(let s) where ["foreground", "background", "idle", "active"].contains(s):
            let state = try await http.postJSON("/emulator/v1/devices/\(token)/state", .object([s: .bool(true)]))
            emit(["event": .string("state"), "state": state])
        case .go("uninstall"):
            _ = try await http.postJSON("/emulator/v1/devices/\(token)/uninstall", .object([:]))
            await stop()
            emit(["event": .string("uninstalled"), "token": .string(token)])
        case .go("reinstall"):
            let json = try await http.postJSON("/emulator/v1/devices/\(token)/reinstall", .object([:]))
            await stop()
            cachedUpstream.removeAll()
            try adoptRegistration(json)
            try await goOnline()
        case .go(let other):
            emit(["event": .string("error"), "error": .string("unknown state \"\(other)\"")])
        case .tap(let id):
            let path = id.replacingOccurrences(of: "%", with: "%25")
            let entry = try await http.postJSON("/emulator/v1/devices/\(token)/tray/\(path)/tap", .object([:]))
            emit(["event": .string("message"), "message": entry["message"] ?? .null, "opened_from": .string("tray")])
        case .upstream(let fields):
            sendUpstream(fields)
        case .subscribe(let topic, let on):
            // As FirebaseMessaging's subscribeToTopic: for the app's (first) sender.
            let path = "/emulator/v1/devices/\(token)/topics/\(Self.pathSegment(topic))"
            _ = on ? try await http.postJSON(path, .object([:])) : try await http.deleteJSON(path)
            emit(["event": .string(on ? "subscribed" : "unsubscribed"), "topic": .string(topic)])
        case .show("groups"):
            // The device's own view: the groups it is a member of (any sender), without the others.
            let device = try await http.getJSON("/emulator/v1/devices/\(token)")
            emit(["event": .string("groups"), "groups": device["groups"] ?? .array([])])
        case .show(let other):
            emit(["event": .string("error"), "error": .string("unknown view \"\(other)\" (groups)")])
        case .refreshToken:
            // The installation keeps its first token as its key (and these routes take any of its
            // tokens); the app is told the new one, as onNewToken tells it.
            let device = try await http.postJSON("/emulator/v1/devices/\(token)/refresh", .object([:]))
            // The previous token is the one before the new one: the record says both.
            let refreshed = device["refreshed_tokens"]?.arrayValue ?? []
            emit(["event": .string("token"), "token": device["canonical_token"] ?? .null,
                       "previous_token": refreshed.count >= 2 ? refreshed[refreshed.count - 2] : device["token"] ?? .null])
        case .invalid(let line):
            emit(["event": .string("error"), "error": .string("not a command: \(line)")])
        }
    }

    /// A topic name in a URL path: `%` (allowed in names) must be escaped; the rest of the alphabet is safe.
    static func pathSegment(_ topic: String) -> String {
        topic.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-_.~"))) ?? topic
    }

    private mutating func sendUpstream(_ fields: [String: JSONValue]) {
        guard let credentials else { return }
        var message = fields
        if message["to"] == nil, let sender = credentials.senders.first {
            message["to"] = .string("\(sender)@gcm.googleapis.com")
        }
        if message["message_id"] == nil {
            upstreamCounter += 1
            message["message_id"] = .string("up-\(upstreamCounter)-\(UInt32.random(in: 0 ... .max))")
        }
        // As the client library does: only string data values are sent.
        if let data = message["data"]?.objectValue {
            message["data"] = .object(data.filter { if case .string = $0.value { return true } else { return false } })
        }
        let json = JSONValue.object(message)
        if let c = connection, !c.isActive { connection = nil }
        if let connection {
            connection.sendUpstream(json)
        } else if cachedUpstream.count < Self.maxCachedUpstream {
            cachedUpstream.append(json)
        } else {
            emit(["event": .string("send_error"), "message_id": message["message_id"] ?? .null,
                       "error": .string("TOO_MANY_PENDING_MESSAGES")])
        }
    }
}

/// A failure already told in words.
struct DeviceSessionError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// `device --push-service emulator`: the browser subscribes with the emulator as its push service.
public struct WebPushServiceRequest: Sendable {
    /// The `applicationServerKey` given to `pushManager.subscribe()` (base64url), if any.
    public var applicationServerKey: String?
    /// `fcm`, `wp` or `local` (`POST /emulator/v1/web-push/subscriptions`'s `endpoint`).
    public var endpointForm: String

    public init(applicationServerKey: String?, endpointForm: String) {
        self.applicationServerKey = applicationServerKey
        self.endpointForm = endpointForm
    }
}
