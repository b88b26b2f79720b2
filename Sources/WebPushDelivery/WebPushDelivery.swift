import DeliveryCore
import AsyncHTTPClient
import CCSEngine
import StoreModel
import Foundation
import Locking
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import PushDomain
import Synchronization
import WebPushService

/// Web Push delivery (`serve --web-push on`): the emulator plays FCM's part towards a web device's
/// push service, as a browser's subscription names it (any but FCM's own, Chrome's, where the
/// emulator itself is the push service and the device channel delivers). Each installed web device has a link that is
/// always "online": a message handed to it is encrypted to the subscription (RFC 8291), signed for
/// with the emulator's VAPID key (RFC 8292) and POSTed to the endpoint (RFC 8030); the push service's
/// 201 is the device's confirmation. 404 or 410 (the subscription is gone) uninstalls the app, as
/// FCM then answers UNREGISTERED; anything else (429, 5xx, no answer) takes the device offline and
/// tries again with backoff, the messages waiting in its queue meanwhile (docs/platforms.md).
public final class WebPushDelivery: Sendable {
    let engine: Engine
    let vapid: VAPIDKey
    let client: HTTPClient
    let logger: Logger
    /// The current link of each web device (by installation token).
    let links = Locked<[String: WebPushLink]>([:])
    let stopped = Atomic<Bool>(false)

    /// Seconds between attempts after a failure: doubled each time, up to `maximumBackoff`.
    static let firstBackoff: Double = 1
    static let maximumBackoff: Double = 60

    /// `extraTrustRoots`: certificates trusted besides the system's, for a push service of one's own
    /// that serves https with a certificate of a private CA (`serve --web-push-ca`).
    public init(engine: Engine, vapid: VAPIDKey, group: any EventLoopGroup, logger: Logger,
                extraTrustRoots: [NIOSSLCertificate] = []) {
        self.engine = engine
        self.vapid = vapid
        self.logger = logger
        var configuration = HTTPClient.Configuration()
        if !extraTrustRoots.isEmpty {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.additionalTrustRoots = [.certificates(extraTrustRoots)]
            configuration.tlsConfiguration = tls
        }
        configuration.timeout.connect = .seconds(10)
        configuration.timeout.read = .seconds(30)
        configuration.redirectConfiguration = .disallow
        client = HTTPClient(eventLoopGroupProvider: .shared(group), configuration: configuration)
    }

    /// Links every installed web device, and every one registered later.
    public func start() {
        engine.observeRegistrations { [weak self] record in self?.attach(record, failures: 0) }
        for record in engine.allDevices() { attach(record, failures: 0) }
    }

    public func shutdown() async {
        stopped.store(true, ordering: .relaxed)
        let all = links.withLock { l -> [WebPushLink] in defer { l = [:] }; return Array(l.values) }
        for link in all { link.close() }
        try? await client.shutdown()
    }

    func attach(_ record: DeviceRecord, failures: Int) {
        guard !stopped.load(ordering: .relaxed), record.platform == .web, record.status == .active,
              let subscription = record.webSubscription, !subscription.isServedByEmulator else { return }
        let link = WebPushLink(token: record.token, subscription: subscription, delivery: self, failures: failures)
        links.withLock { $0[record.token] = link }
        engine.deviceConnected(token: record.token, link: link)
    }

    func push(_ delivery: DeviceDelivery, via link: WebPushLink) async {
        let message = delivery.message
        let request: HTTPClientRequest
        do {
            request = try makeRequest(message, to: link.subscription)
        } catch {
            // It can never go (too big for one record): confirmed so that it does not block the queue.
            logger.warning("a message cannot be sent by Web Push; dropped",
                           metadata: ["token": "\(link.token.prefix(24))…", "error": "\(error)"])
            engine.deviceAcknowledged(token: link.token, deviceMessageID: message.deviceMessageID)
            return
        }
        let status: UInt
        do {
            let response = try await client.execute(request, timeout: .seconds(30))
            status = response.status.code
            _ = try? await response.body.collect(upTo: 64 * 1024)
        } catch {
            logger.notice("the push service did not answer", metadata: ["endpoint": "\(link.subscription.endpoint)",
                                                                       "error": "\(error)"])
            return retryLater(link)
        }
        switch status {
        case 200..<300:
            engine.deviceAcknowledged(token: link.token, deviceMessageID: message.deviceMessageID)
        case 404, 410:
            logger.notice("the push subscription is gone: the app counts as uninstalled",
                          metadata: ["endpoint": "\(link.subscription.endpoint)", "status": "\(status)"])
            try? await engine.uninstall(token: link.token)
        default:
            logger.notice("the push service refused a message", metadata: ["endpoint": "\(link.subscription.endpoint)",
                                                                          "status": "\(status)"])
            retryLater(link)
        }
    }

    func makeRequest(_ message: QueuedMessage, to subscription: WebPushSubscription) throws -> HTTPClientRequest {
        let body = try WebPushEncryption.encrypt(Array(message.payload.utf8), to: subscription)
        var request = HTTPClientRequest(url: subscription.endpoint)
        request.method = .POST
        let now = engine.clock.nowMillis()
        request.headers.add(name: "TTL", value: String(max(0, (message.expiresAt - now) / 1000)))
        request.headers.add(name: "Urgency", value: message.priority == Priority.high.rawValue ? "high" : "normal")
        // RFC 8030 §5.4: a topic replaces an undelivered message with the same one; at most 32 base64url characters.
        if let key = message.collapseKey, (1...32).contains(key.utf8.count),
           key.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || $0 == 0x2D || $0 == 0x5F }) {
            request.headers.add(name: "Topic", value: key)
        }
        request.headers.add(name: "Content-Encoding", value: "aes128gcm")
        request.headers.add(name: "Content-Type", value: "application/octet-stream")
        request.headers.add(name: "Authorization", value: try vapid.authorization(endpoint: subscription.endpoint, nowMillis: now))
        request.body = .bytes(ByteBuffer(bytes: body))
        return request
    }

    /// The device goes offline (its unconfirmed messages back to the queue) and a new link tries again later.
    func retryLater(_ link: WebPushLink) {
        guard link.markFailed() else { return }
        engine.deviceDisconnected(token: link.token, link: link)
        let failures = link.failures + 1
        let delay = min(Self.maximumBackoff, Self.firstBackoff * pow(2, Double(failures - 1)))
        Task { [weak self] in
            try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
            guard let self, let record = engine.device(token: link.token),
                  links.withLock({ $0[link.token] === link }) else { return }
            attach(record, failures: failures)
        }
    }
}

/// One web device's link: "online" while the push service takes its messages. Messages go out one
/// after another, in the order the engine hands them over.
final class WebPushLink: DeviceLink {
    let token: String
    let subscription: WebPushSubscription
    let failures: Int
    private let outbox: AsyncStream<DeviceDelivery>.Continuation
    /// Closed by the engine (uninstall, another connection took over) or failed (retried by a new link).
    private let ended = Atomic<Bool>(false)

    init(token: String, subscription: WebPushSubscription, delivery: WebPushDelivery, failures: Int) {
        self.token = token
        self.subscription = subscription
        self.failures = failures
        let (stream, outbox) = AsyncStream.makeStream(of: DeviceDelivery.self)
        self.outbox = outbox
        Task { [self] in
            for await message in stream {
                // After a failure the rest stay with the engine, which queues them again.
                guard !ended.load(ordering: .relaxed) else { continue }
                await delivery.push(message, via: self)
            }
        }
    }

    var wantsPlatformViews: Bool { false }

    func deliver(_ messages: [DeviceDelivery]) {
        for message in messages { outbox.yield(message) }
    }

    func close() {
        ended.store(true, ordering: .relaxed)
        outbox.finish()
    }

    /// True the first time: this link's failure takes the device offline once.
    func markFailed() -> Bool {
        let first = !ended.exchange(true, ordering: .relaxed)
        outbox.finish()
        return first
    }
}
