import CCSEngine
import CCSProtocol
import PushDomain
import Foundation
import HTTPRequestBody
import Hummingbird
import NIOCore
import WebPushService

/// The emulator's own routes for the subscriptions it serves (docs/web-push.md, docs/admin-api.md):
/// make one as a browser's `pushManager.subscribe()` would, list what it received (decrypted), and
/// end it (unsubscribe or expiry: the endpoint then answers 410 Gone). Under `/emulator/v1/`, so
/// behind the admin guard.
extension FCMHTTPAPI {
    /// The sender ID of Chrome's own push service (a web app manifest's `gcm_sender_id`): the
    /// sender of a subscription made without one.
    static let webPushDefaultSender = "103953800507"

    /// Where a new subscription's endpoint points.
    enum EndpointForm: String, CaseIterable {
        /// `https://fcm.googleapis.com/fcm/send/<token>`, as Chrome's subscriptions (proxy mode).
        case fcm
        /// `https://fcm.googleapis.com/wp/<token>`, the newer form.
        case wp
        /// `http://<this emulator's host:port>/fcm/send/<token>`: reached without a proxy.
        case local
    }

    func addWebPushAdminRoutes(to router: Router<some RequestContext>) {
        let base = "emulator/v1/web-push/subscriptions"
        router.post(RouterPath(base)) { request, _ in try await self.createSubscription(request) }
        router.get(RouterPath("\(base)/:token")) { _, context in
            let record = try self.servedSubscription(try context.parameters.require("token"))
            return Self.json(Self.subscriptionJSON(record, secrets: true))
        }
        router.get(RouterPath("\(base)/:token/messages")) { _, context in
            let record = try self.servedSubscription(try context.parameters.require("token"))
            let messages = self.webPushInbox.messages(token: record.token).map(WebPushInbox.json)
            return Self.json(.object(["messages": .array(messages)]))
        }
        for action in ["expire", "unsubscribe"] {
            router.post(RouterPath("\(base)/:token/\(action)")) { _, context in
                let record = try self.servedSubscription(try context.parameters.require("token"))
                do { try await self.engine.uninstall(token: record.token) } catch {
                    throw FCMAdminError(status: .internalServerError, message: "\(error)")
                }
                return Self.json(.object(["token": .string(record.token), "status": .string("gone")]))
            }
        }
    }

    func servedSubscription(_ given: String) throws -> Engine.DeviceRecord {
        let token = Self.pathToken(given)
        guard let record = engine.device(token: token), record.webSubscription?.serviceKeys != nil else {
            throw FCMAdminError(status: .notFound, message: "no push subscription the emulator serves has token \(token.prefix(300))")
        }
        return record
    }

    func createSubscription(_ request: Request) async throws -> Response {
        let body = try await request.collectBody(limit: Self.maximumTokenRequestBytes)
        guard let text = UTF8Body.text(body), case .object(let fields)? = try? JSONValue.parse(text.isEmpty ? "{}" : text) else {
            throw FCMAdminError(status: .badRequest, message: "the body must be a JSON object")
        }
        let request = try SubscriptionRequest(fields, authority: request.head.authority)
        let keys = SubscriptionPrivateKeys.generate()
        let subscription = WebPushSubscription(
            endpoint: request.endpointPrefix, p256dh: Base64URL.encode(keys.publicKeyBytes), auth: Base64URL.encode(keys.authSecret),
            serviceKeys: .init(privateKey: Base64URL.encode(keys.privateKey.rawRepresentation),
                               applicationServerKey: request.applicationServerKey))
        do {
            let record = try await engine.registerDevice(app: request.app, senders: [request.sender], platform: .web,
                                                         webSubscription: subscription)
            return Self.json(status: .created, Self.subscriptionJSON(record, secrets: true))
        } catch {
            switch error {
            case .unknownSender: throw FCMAdminError(status: .forbidden, message: error.description)
            case .storeFailure: throw FCMAdminError(status: .internalServerError, message: error.description)
            case .invalidRequest, .unknownDevice: throw FCMAdminError(status: .badRequest, message: error.description)
            }
        }
    }

    /// A token from a path: a client may have percent-encoded its ":" (Hummingbird leaves it so).
    static func pathToken(_ segment: String) -> String {
        segment.contains("%") ? (segment.removingPercentEncoding ?? segment) : segment
    }

    /// The browser's `toJSON()` under "subscription", the device's registration beside it, and with
    /// `secrets` the device secret and the browser's private key (what `device --token` needs to
    /// connect and decrypt; admin routes only, as the device secret is on `GET devices/<token>`).
    static func subscriptionJSON(_ record: Engine.DeviceRecord, secrets: Bool) -> JSONValue {
        var fields: [String: JSONValue] = [
            "token": .string(record.token), "device_id": .string(record.deviceID), "app": .string(record.app),
            "platform": .string(record.platform.rawValue), "senders": .array(record.senders.map { .string($0) }),
            "status": .string(record.status == .active ? "active" : "gone"),
            "subscription": record.webSubscription?.browserJSON ?? .null,
            "application_server_key": record.webSubscription?.serviceKeys?.applicationServerKey.map { .string($0) } ?? .null,
        ]
        if secrets {
            fields["device_secret"] = .string(record.secret)
            fields["private_key"] = record.webSubscription?.serviceKeys.map { .string($0.privateKey) } ?? .null
        }
        return .object(fields)
    }
}

/// `POST /emulator/v1/web-push/subscriptions`'s body, checked.
struct SubscriptionRequest {
    var app: String
    var sender: String
    var applicationServerKey: String?
    var endpointPrefix: String

    init(_ fields: [String: JSONValue], authority: String?) throws(FCMAdminError) {
        func string(_ key: String) throws(FCMAdminError) -> String? {
            switch fields[key] {
            case nil, .null?: return nil
            case .string(let s)?: return s
            default: throw FCMAdminError(status: .badRequest, message: "\"\(key)\" must be a string")
            }
        }
        app = try string("app") ?? "web-push"
        sender = try string("sender") ?? FCMHTTPAPI.webPushDefaultSender
        if let key = try string("application_server_key") {
            guard let point = Base64URL.decode(key), point.count == 65, point[0] == 0x04 else {
                throw FCMAdminError(status: .badRequest,
                                    message: "\"application_server_key\" must be a base64url P-256 public key (65 bytes, uncompressed), as the browser's applicationServerKey")
            }
            applicationServerKey = key
        }
        let formText = try string("endpoint") ?? FCMHTTPAPI.EndpointForm.fcm.rawValue
        guard let form = FCMHTTPAPI.EndpointForm(rawValue: formText) else {
            throw FCMAdminError(status: .badRequest, message: "\"endpoint\" must be fcm, wp or local")
        }
        switch form {
        case .fcm: endpointPrefix = "https://fcm.googleapis.com/fcm/send/"
        case .wp: endpointPrefix = "https://fcm.googleapis.com/wp/"
        case .local:
            guard let authority, FCMHTTPAPI.isHostAndPort(authority) else {
                throw FCMAdminError(status: .badRequest, message: "the request has no usable Host header, needed for a local endpoint")
            }
            endpointPrefix = "http://\(authority)/fcm/send/"
        }
    }
}
