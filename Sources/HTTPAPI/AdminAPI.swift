import DeliveryCore
import CCSEngine
import CCSProtocol
import PushDomain
import Foundation
import HTTPRequestBody
import Hummingbird
import NIOCore

/// Facts about the running emulator that the API reports (ports are known only once bound).
public struct EmulatorInfo: Sendable {
    public var ccsPort: Int
    public var devicePort: Int
    public var httpPort: Int
    public var caCertPath: String
    public var caCertPEM: String
    public var dataDir: String
    /// The APNs gateway and feedback ports (0: not known).
    public var apnsPort = 0
    public var apnsFeedbackPort = 0
    /// The APNs HTTP/2 provider API.
    public var apnsHTTP2Port = 0
    /// The second CCS port (`--ccs-preprod-port`); nil: not served.
    public var ccsPreprodPort: Int?
    /// With `--web-push on`: the VAPID public key the emulator signs Web Push requests with (base64url).
    public var vapidPublicKey: String?

    public init(ccsPort: Int, devicePort: Int, httpPort: Int, caCertPath: String, caCertPEM: String, dataDir: String) {
        self.ccsPort = ccsPort
        self.devicePort = devicePort
        self.httpPort = httpPort
        self.caCertPath = caCertPath
        self.caCertPEM = caCertPEM
        self.dataDir = dataDir
    }
}

/// An error answered in Google's API error shape: `{"error":{"code":…,"message":…,"status":…}}`.
struct APIError: Error, HTTPResponseError {
    var status: HTTPResponse.Status
    var message: String
    var googleStatus: String

    static func badRequest(_ message: String) -> APIError { APIError(status: .badRequest, message: message, googleStatus: "INVALID_ARGUMENT") }
    static func internalError(_ message: String) -> APIError { APIError(status: .internalServerError, message: message, googleStatus: "INTERNAL") }
    static func notFound(_ message: String) -> APIError { APIError(status: .notFound, message: message, googleStatus: "NOT_FOUND") }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        JSONResponse.make(status: status, .object(["error": .object([
            "code": .int(Int64(status.code)), "message": .string(message), "status": .string(googleStatus),
        ])]))
    }
}

enum JSONResponse {
    static func make(status: HTTPResponse.Status = .ok, _ value: JSONValue) -> Response {
        var buffer = ByteBuffer(string: value.encoded())
        buffer.writeString("\n")
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: buffer))
    }
}

/// The emulator's own API under `/emulator/v1/` (docs/admin-api.md).
public struct AdminAPI: Sendable {
    let engine: Engine
    let info: @Sendable () -> EmulatorInfo

    /// Connection-layer figures for `GET /emulator/v1/info` (`"connections"`).
    let connectionStatistics: @Sendable () -> [String: Int]

    /// The Prometheus exposition text for `GET /metrics` (nil: no such route).
    let metricsText: (@Sendable () -> String)?

    public init(engine: Engine, info: @escaping @Sendable () -> EmulatorInfo,
                connectionStatistics: @escaping @Sendable () -> [String: Int] = { [:] },
                metricsText: (@Sendable () -> String)? = nil) {
        self.connectionStatistics = connectionStatistics
        self.metricsText = metricsText
        self.engine = engine
        self.info = info
    }

    public func addRoutes(to router: Router<some RequestContext>) {
        if let metricsText {
            router.get("metrics") { _, _ in
                Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                         body: .init(byteBuffer: ByteBuffer(string: metricsText())))
            }
        }
        let v1 = router.group("emulator/v1")
        v1.get("health") { _, _ in JSONResponse.make(.object(["status": .string("ok")])) }
        v1.post("store/sync") { _, _ in
            // Everything accepted before this request is committed when it returns (crash tests wait
            // on this fact instead of sleeping).
            await self.engine.sync()
            let st = self.engine.storeStatistics
            return JSONResponse.make(.object(["durable": .bool(true), "transactions": .int(Int64(st.batches))]))
        }
        v1.post("reset") { request, _ in
            // Everything, or one sender's state: `?sender=ID` or a body `{"sender":"ID"}`.
            var sender = request.uri.queryParameters["sender"].map(String.init)
            let body = try await request.collectBody(limit: 1 << 16)
            if body.readableBytes > 0, sender == nil {
                guard case .object(let fields)? = try? Self.parseJSON(body) else {
                    throw APIError.badRequest("the body must be empty or a JSON object such as {\"sender\":\"123\"}")
                }
                switch fields["sender"] {
                case .string(let s)?: sender = s
                case .int(let n)? where n >= 0: sender = String(n)
                case nil: break
                default: throw APIError.badRequest("\"sender\" must be a sender ID")
                }
            }
            do {
                if let sender {
                    guard Engine.isSenderID(sender) else { throw APIError.badRequest("\"sender\" must be 1 to 32 digits") }
                    let removed = try await self.engine.reset(sender: sender)
                    return JSONResponse.make(.object(["devices_removed": .int(Int64(removed)), "sender": .string(sender)]))
                }
                let removed = try await self.engine.reset()
                try? await self.engine.journal?.removeAll()
                return JSONResponse.make(.object(["devices_removed": .int(Int64(removed))]))
            } catch let error as DeviceManagementError { throw Self.apiError(error) }
        }
        v1.get("info") { _, _ in self.infoResponse() }
        v1.get("ca.pem") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/x-pem-file"],
                     body: .init(byteBuffer: ByteBuffer(string: self.info().caCertPEM)))
        }
        v1.post("devices") { request, context in try await self.registerDevice(request, context) }
        v1.get("devices") { _, _ in
            let counts = try Self.reading("the queues") { try self.engine.queueCounts() }
            let devices = self.engine.allDevices().map { self.deviceJSON($0, queued: counts[$0.token] ?? 0, secrets: false) }
            return JSONResponse.make(.object(["devices": .array(devices)]))
        }
        v1.get("devices/:token") { _, context in
            let token = self.installationToken(try context.parameters.require("token"))
            guard let device = self.engine.device(token: token) else { throw APIError.notFound("no device with token \(token)") }
            let queue = try Self.reading("the queue") { try self.engine.queuedMessages(token: token) }
            var json = self.deviceJSON(device, queued: queue.count, secrets: true)
            if case .object(var fields) = json {
                // Held back by the collapsible-message throttle: `"throttled": true` on the entry.
                let throttled = self.engine.throttledMessageIDs(token: token)
                fields["queue"] = .array(queue.map { m in
                    guard throttled.contains(m.deviceMessageID), case .object(var entry) = self.queuedJSON(m) else { return self.queuedJSON(m) }
                    entry["throttled"] = true
                    return .object(entry)
                })
                fields["groups"] = self.deviceGroupsJSON(token: token)
                json = .object(fields)
            }
            return JSONResponse.make(json)
        }
        v1.get("connections") { _, _ in
            let list = self.engine.connections().map { c -> JSONValue in
                var fields: [String: JSONValue] = [
                    "id": .string(c.info.id), "sender_id": .string(c.info.senderID),
                    "remote_address": .string(c.info.remoteAddress),
                    "connected_at": .int(Int64(c.info.connectedAtMillis)),
                    "pending": .int(Int64(c.pending)), "draining": .bool(c.draining),
                    "unacked_outbound": .int(Int64(c.unackedOutbound)),
                ]
                if let jid = c.info.resource { fields["jid"] = .string(jid) }
                return .object(fields)
            }
            return JSONResponse.make(.object(["connections": .array(list)]))
        }
        addDeviceControlRoutes(to: v1)
        addClockAndOutboundRoutes(to: v1)
        addTopicRoutes(to: v1)
        addDeviceGroupRoutes(to: v1)
        addAPNsRoutes(to: v1)
        addConformanceRoutes(to: v1)
        addJournalRoutes(to: v1)
        v1.post("connections/:id/drain") { _, context in
            let id = try context.parameters.require("id")
            guard self.engine.drain(connectionID: id) else { throw APIError.notFound("no connection with id \(id)") }
            return JSONResponse.make(status: .accepted, .object(["id": .string(id), "draining": .bool(true)]))
        }
    }

    private func infoResponse() -> Response {
        let i = info()
        let st = engine.storeStatistics
        return JSONResponse.make(.object([
            "connections": .object(connectionStatistics().mapValues { .int(Int64($0)) }),
            "store": .object([
                "transactions": .int(Int64(st.batches)), "ops": .int(Int64(st.ops)),
                "live_writes_committed": .int(Int64(st.cancellableCommitted)),
                "live_writes_called_off": .int(Int64(st.cancellableCalledOff)),
            ]),
            "ccs_port": .int(Int64(i.ccsPort)), "device_port": .int(Int64(i.devicePort)),
            "ccs_preprod_port": i.ccsPreprodPort.map { .int(Int64($0)) } ?? .null,
            "http_port": .int(Int64(i.httpPort)), "ca_cert": .string(i.caCertPath),
            "apns_port": .int(Int64(i.apnsPort)), "apns_feedback_port": .int(Int64(i.apnsFeedbackPort)),
            "apns_http2_port": .int(Int64(i.apnsHTTP2Port)),
            "data_dir": .string(i.dataDir), "auth": .string(engine.configuration.authMode.rawValue),
            "devices": .int(Int64(engine.deviceCount)),
            "device_message_rate": engine.configuration.deviceMessageRate.map { .string($0.description) } ?? .null,
            "project_message_rate": engine.configuration.projectMessageRate.map { .string($0.description) } ?? .null,
            "topic_message_rate": engine.configuration.topicMessageRate.map { .string($0.description) } ?? .null,
            "collapsible_throttle": engine.configuration.collapsibleThrottle.map { .string($0.description) } ?? .null,
            "web_push": i.vapidPublicKey.map { .object(["vapid_public_key": .string($0)]) } ?? .null,
        ]))
    }

    private func registerDevice(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let fields = try await Self.jsonBody(request, emptyAllowed: false)
        guard case .string(let app)? = fields["app"] else { throw APIError.badRequest("\"app\" (string) is required") }
        var senders: [String] = []
        switch fields["senders"] ?? fields["sender"] {
        case .array(let items)?:
            for item in items {
                switch item {
                case .string(let s): senders.append(s)
                case .int(let n) where n >= 0: senders.append(String(n))
                default: throw APIError.badRequest("\"senders\" must be an array of sender IDs")
                }
            }
        case .string(let s)?: senders = [s]
        case nil where fields["apns"] != nil || fields["apns_token"] != nil: senders = []  // an APNs-only app
        default: throw APIError.badRequest("\"senders\" (array of sender IDs) is required")
        }
        var apns: APNsTokenRequest?
        switch (fields["apns"], fields["apns_token"]) {
        case (nil, nil), (.bool(false)?, nil): break
        case (.bool(true)?, nil), (nil, .null?): apns = .generate
        case (nil, .string(let token)?), (.bool(true)?, .string(let token)?): apns = .token(token)
        default:
            throw APIError.badRequest("\"apns\" must be a boolean and \"apns_token\" a string of 64 hexadecimal digits")
        }
        var platform = Platform.android
        if let p = fields["platform"] {
            guard case .string(let s) = p, let named = Platform(rawValue: s) else {
                throw APIError.badRequest("\"platform\" must be \"android\", \"ios\" or \"web\"")
            }
            platform = named
        }
        // A web device registers like the JS SDK: the web app's id as `app`, plus the browser's
        // PushSubscription (`subscription.toJSON()`).
        var subscription: WebPushSubscription?
        if let given = fields["subscription"], !given.isNull {
            switch WebPushSubscription.parse(given) {
            case .success(let s): subscription = s
            case .failure(let error): throw APIError.badRequest(error.reason)
            }
        }
        do {
            let record = try await engine.registerDevice(app: app, senders: senders, platform: platform,
                                                         webSubscription: subscription, apns: apns)
            return JSONResponse.make(status: .created, deviceJSON(record, queued: 0, secrets: true))
        } catch {
            throw Self.apiError(error)
        }
    }

    static func apiError(_ error: DeviceManagementError) -> APIError {
        switch error {
        case .invalidRequest(let m): return .badRequest(m)
        case .unknownSender: return APIError(status: .forbidden, message: error.description, googleStatus: "PERMISSION_DENIED")
        case .unknownDevice: return .notFound(error.description)
        case .storeFailure: return APIError(status: .internalServerError, message: error.description, googleStatus: "INTERNAL")
        }
    }

    /// A store read for a response; a failure is a 500 that says what could not be read, never an
    /// empty answer that looks like "nothing there".
    static func reading<T>(_ what: String, _ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw APIError.internalError("could not read \(what): \(error)") }
    }

    /// A request's JSON object body (at most 1 MiB; empty: no fields, where `emptyAllowed`). Text
    /// that is not UTF-8 or names a key twice is a 400 that says so, as on every listener.
    static func jsonBody(_ request: Request, emptyAllowed: Bool = true) async throws -> [String: JSONValue] {
        let body = try await request.collectBody(limit: 1 << 20)
        if body.readableBytes == 0 && emptyAllowed { return [:] }
        let value: JSONValue
        do { value = try parseJSON(body) } catch {
            throw APIError.badRequest("the body must be a JSON object: \(error.description)")
        }
        guard case .object(let fields) = value else { throw APIError.badRequest("the body must be a JSON object") }
        return fields
    }

    /// JSON from a body's bytes: invalid UTF-8 is an error here, not replaced.
    static func parseJSON(_ body: ByteBuffer) throws(JSONParseError) -> JSONValue {
        let result = body.withUnsafeReadableBytes { bytes -> Result<JSONValue, JSONParseError> in
            do throws(JSONParseError) { return .success(try JSONValue.parse(utf8: bytes)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    func addDeviceControlRoutes(to v1: RouterGroup<some RequestContext>) {
        v1.post("devices/:token/state") { request, context in
            let token = self.installationToken(try context.parameters.require("token"))
            let fields = try await Self.jsonBody(request)
            var foreground: Bool?, idle: Bool?
            for (key, value) in fields {
                guard let b = value.boolValue else { throw APIError.badRequest("\"\(key)\" must be true or false") }
                switch key {
                case "foreground": foreground = b
                case "background": foreground = !b
                case "idle": idle = b
                case "active": idle = !b
                default: throw APIError.badRequest("unknown state \"\(key)\" (foreground, background, idle, active)")
                }
            }
            do {
                let st = try await self.engine.setDeviceState(token: token, foreground: foreground, idle: idle)
                return JSONResponse.make(.object(["foreground": .bool(st.foreground), "idle": .bool(st.idle)]))
            } catch let error as DeviceManagementError { throw Self.apiError(error) }
        }
        v1.post("devices/:token/uninstall") { _, context in
            let token = self.installationToken(try context.parameters.require("token"))
            do { try await self.engine.uninstall(token: token) } catch let error as DeviceManagementError { throw Self.apiError(error) }
            return JSONResponse.make(.object(["token": .string(token), "status": .string("uninstalled")]))
        }
        v1.post("devices/:token/reinstall") { _, context in
            let token = self.installationToken(try context.parameters.require("token"))
            do {
                let record = try await self.engine.reinstall(token: token)
                return JSONResponse.make(status: .created, self.deviceJSON(record, queued: 0, secrets: true))
            } catch let error as DeviceManagementError { throw Self.apiError(error) }
        }
        v1.post("devices/:token/refresh") { _, context in
            let token = self.installationToken(try context.parameters.require("token"))
            do {
                let record = try await self.engine.refreshToken(token)
                let queued = try Self.reading("the queue") { try self.engine.queuedMessages(token: record.token).count }
                return JSONResponse.make(self.deviceJSON(record, queued: queued, secrets: true))
            } catch let error as DeviceManagementError { throw Self.apiError(error) }
        }
        v1.post("devices/:token/disconnect") { _, context in
            let token = self.installationToken(try context.parameters.require("token"))
            guard self.engine.device(token: token) != nil else { throw APIError.notFound("no device with token \(token)") }
            let was = self.engine.disconnectDevice(token: token)
            return JSONResponse.make(.object(["token": .string(token), "was_online": .bool(was)]))
        }
        v1.get("devices/:token/tray") { _, context in
            let token = self.installationToken(try context.parameters.require("token"))
            guard self.engine.device(token: token) != nil else { throw APIError.notFound("no device with token \(token)") }
            let tray = try Self.reading("the tray") { try self.engine.tray(token: token) }
            return JSONResponse.make(.object(["tray": .array(tray.map(Self.trayJSON))]))
        }
        v1.post("devices/:token/tray/:id/tap") { _, context in
            let token = self.installationToken(try context.parameters.require("token"))
            let raw = try context.parameters.require("id")
            do {
                // Message ids contain "%": accept the id as written and percent-encoded ("%25").
                var entry = try await self.engine.tapNotification(token: token, deviceMessageID: raw)
                if entry == nil, let decoded = raw.removingPercentEncoding, decoded != raw {
                    entry = try await self.engine.tapNotification(token: token, deviceMessageID: decoded)
                }
                let id = raw
                guard let entry else {
                    throw APIError.notFound("no notification \(id) in the tray")
                }
                return JSONResponse.make(Self.trayJSON(entry))
            } catch let error as DeviceManagementError { throw Self.apiError(error) }
        }
    }

    /// The emulator's clock (read, and advanced when virtual) and the items waiting for app servers.
    func addClockAndOutboundRoutes(to v1: RouterGroup<some RequestContext>) {
        v1.get("clock") { _, _ in self.clockJSON(self.engine.clock.nowMillis()) }
        v1.post("clock/advance") { request, _ in
            let fields = try await Self.jsonBody(request)
            // Checked before any conversion: a Double too large for Int64 traps the process.
            let limit = Self.maximumAdvanceMillis
            var ms: Int64 = 0
            if let v = fields["seconds"] {
                guard let n = v.numberValue, n.isFinite, n >= 0, n * 1000 <= Double(limit) else {
                    throw APIError.badRequest("\"seconds\" must be a number from 0 to \(limit / 1000) (100 years)")
                }
                ms += Int64(n * 1000)
            }
            if let v = fields["millis"] {
                guard let n = v.intValue, n >= 0, n <= limit else {
                    throw APIError.badRequest("\"millis\" must be an integer from 0 to \(limit) (100 years)")
                }
                ms += n
            }
            do {
                return self.clockJSON(try await self.engine.advanceClock(byMillis: ms))
            } catch let error as Engine.ClockAdvanceError {
                switch error {
                case .wallClock:
                    throw APIError(status: .conflict, message: "the clock is the wall clock; start with --clock virtual",
                                   googleStatus: "FAILED_PRECONDITION")
                case .beyondMaximum:
                    throw APIError.badRequest("the virtual clock cannot pass the end of year 9999")
                }
            }
        }
        v1.get("outbound") { _, _ in
            let items = self.engine.outbound().sorted { ($0.senderID, $0.messageID) < ($1.senderID, $1.messageID) }
            return JSONResponse.make(.object(["outbound": .array(items.map { o in
                var f: [String: JSONValue] = ["sender_id": .string(o.senderID), "kind": .string(o.kind.rawValue),
                                              "message_id": .string(o.messageID), "token": .string(o.token),
                                              "expires_at": .int(o.expiresAt)]
                if let c = o.connectionID { f["connection_id"] = .string(c) }
                return .object(f)
            })]))
        }
    }

    /// The most one advance may move the virtual clock: 100 years.
    static let maximumAdvanceMillis: Int64 = 100 * 366 * 86_400_000

    func clockJSON(_ now: Int64) -> Response {
        JSONResponse.make(.object(["now_ms": .int(now), "kind": .string(engine.isVirtualClock ? "virtual" : "wall")]))
    }

    static func trayJSON(_ t: Engine.TrayEntry) -> JSONValue {
        var fields: [String: JSONValue] = [
            "message_id": .string(t.deviceMessageID), "shown_at": .int(t.shownAt),
            "message": (try? JSONValue.parse(t.payload)) ?? .string(t.payload),
        ]
        // What the platform showed (docs/platforms.md); entries from before v7 have none.
        if let view = t.view.flatMap({ try? JSONValue.parse($0) }) { fields["view"] = view }
        return .object(fields)
    }

    /// The installation a path's token names: routes take any of its tokens, also a refreshed one, and
    /// act on the installation (keyed by its first token). An unknown token stays as it is.
    func installationToken(_ token: String) -> String {
        engine.device(token: token)?.token ?? token
    }

    func deviceJSON(_ d: Engine.DeviceRecord, queued: Int, secrets: Bool) -> JSONValue {
        var fields: [String: JSONValue] = [
            "token": .string(d.token), "device_id": .string(d.deviceID), "app": .string(d.app),
            "platform": .string(d.platform.rawValue), "senders": .array(d.senders.map { .string($0) }),
            "status": .string(d.status.rawValue), "created_at": .int(Int64(d.createdAt)),
            "online": .bool(engine.isOnline(token: d.token)), "queued": .int(Int64(queued)),
            // What its connection holds handed over and not ACKed: at most the device window.
            "unacked": .int(Int64(engine.handedOverUnacknowledged(token: d.token))),
        ]
        if let st = engine.deviceState(token: d.token) {
            fields["state"] = .object(["foreground": .bool(st.foreground), "idle": .bool(st.idle)])
        }
        if secrets { fields["device_secret"] = .string(d.secret) }
        if let subscription = d.webSubscription { fields["subscription"] = subscription.json }
        if let apns = d.apnsToken { fields["apns_token"] = .string(apns) }
        if !d.refreshedTokens.isEmpty {
            fields["refreshed_tokens"] = .array(d.refreshedTokens.map { .string($0) })
            fields["canonical_token"] = .string(d.canonicalToken)
        }
        var topics: [String: JSONValue] = [:]
        for sender in d.senders {
            let names = (engine.topics(token: d.token, senderID: sender) ?? [:]).keys.sorted()
            if !names.isEmpty { topics[sender] = .array(names.map { .string($0) }) }
        }
        fields["topics"] = .object(topics)
        return .object(fields)
    }

    /// A queue entry with `view`: what the device's platform would show if it were handed over now.
    func queuedJSON(_ m: Engine.QueuedMessage) -> JSONValue {
        guard case .object(var fields) = Self.queuedJSON(m) else { return Self.queuedJSON(m) }
        if let view = engine.platformView(of: m) { fields["view"] = view }
        return .object(fields)
    }

    static func queuedJSON(_ m: Engine.QueuedMessage) -> JSONValue {
        var fields: [String: JSONValue] = [
            "message_id": .string(m.deviceMessageID), "app_message_id": .string(m.appMessageID),
            "sender_id": .string(m.senderID), "priority": .string(m.priority),
            "time_to_live": .int(Int64(m.timeToLive)), "enqueued_at": .int(Int64(m.enqueuedAt)),
            "expires_at": .int(Int64(m.expiresAt)),
            "delivery_receipt_requested": .bool(m.deliveryReceiptRequested),
            "delay_while_idle": .bool(m.delayWhileIdle), "kind": .string(m.kind.rawValue),
            "payload": (try? JSONValue.parse(m.payload)) ?? .string(m.payload),
        ]
        if let ck = m.collapseKey { fields["collapse_key"] = .string(ck) }
        return .object(fields)
    }
}
