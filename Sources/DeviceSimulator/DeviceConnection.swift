import CCSProtocol
import PushDomain
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import XMLStreaming

/// What a simulated device needs to log in on the device channel.
public struct DeviceCredentials: Sendable, Equatable {
    public var token: String
    public var deviceID: String
    public var secret: String
    public var app: String
    public var senders: [String]
    public var platform: String
    /// The APNs device token (64 hex digits) when the iOS app registered for APNs.
    public var apnsToken: String?

    public init(token: String, deviceID: String, secret: String, app: String, senders: [String], platform: String,
                apnsToken: String? = nil) {
        self.apnsToken = apnsToken
        self.token = token
        self.deviceID = deviceID
        self.secret = secret
        self.app = app
        self.senders = senders
        self.platform = platform
    }

    /// From the JSON the registration API returns.
    public init?(json: JSONValue) {
        guard case .object(let o) = json, case .string(let token)? = o["token"],
              case .string(let id)? = o["device_id"], case .string(let secret)? = o["device_secret"] else { return nil }
        self.token = token
        self.deviceID = id
        self.secret = secret
        if case .string(let app)? = o["app"] { self.app = app } else { self.app = "" }
        if case .array(let s)? = o["senders"] {
            senders = s.compactMap { if case .string(let v) = $0 { return v } else { return nil } }
        } else { senders = [] }
        if case .string(let p)? = o["platform"] { platform = p } else { platform = "android" }
        apnsToken = o["apns_token"]?.stringValue
    }
}

public enum DeviceEvent: Sendable, Equatable {
    /// Authenticated and bound: messages flow from now on.
    case connected
    /// A downstream message as the app sees it (a JSON object), or a notice with a `message_type`
    /// (`deleted_messages`, `send_error`). `toTray`: a notification the system shows in the tray
    /// because the app is in the background. `view`: what the device's platform shows
    /// (docs/platforms.md), nil for notices. ACKed right after this event.
    case message(JSONValue, toTray: Bool, view: JSONValue?)
    /// The answer to an upstream message: `{"message_type":"sent"|"send_error","message_id":…}`.
    case upstreamAnswer(JSONValue)
    case disconnected(reason: String?)
}

/// One connection of a simulated device to the device channel (docs/device-protocol.md).
public final class DeviceConnection: Sendable {
    let channel: any Channel

    init(channel: any Channel) { self.channel = channel }

    public static func connect(host: String, port: Int, caPEM: String, credentials: DeviceCredentials,
                               group: any EventLoopGroup,
                               onEvent: @escaping @Sendable (DeviceEvent) -> Void) async throws -> DeviceConnection {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(caPEM.utf8)))
        let context = try NIOSSLContext(configuration: tls)
        let isAddress = (try? SocketAddress(ipAddress: host, port: 0)) != nil
        let bound = group.next().makePromise(of: Void.self)
        let channel = try await ClientBootstrap(group: group)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        try NIOSSLClientHandler(context: context, serverHostname: isAddress ? nil : host))
                    try channel.pipeline.syncOperations.addHandler(
                        DeviceClientHandler(credentials: credentials, bound: bound, onEvent: onEvent))
                }
            }
            .connect(host: host, port: port).get()
        channel.closeFuture.whenComplete { _ in bound.fail(DeviceConnectionClosed()) }
        // Returns once the session is bound: messages flow and upstream may be sent.
        try await bound.futureResult.get()
        return DeviceConnection(channel: channel)
    }

    /// Closes the stream politely, then the socket.
    public func close() async {
        let channel = self.channel
        try? await channel.eventLoop.submit {
            if let handler = try? channel.pipeline.syncOperations.handler(type: DeviceClientHandler.self) {
                handler.sendClose()
            }
        }.get()
        try? await channel.close()
    }

    public var closeFuture: EventLoopFuture<Void> { channel.closeFuture }

    /// False once the connection is gone, whoever closed it.
    public var isActive: Bool { channel.isActive }

    /// Sends an upstream message (`{"to":"SENDER@gcm.googleapis.com","message_id":…,"data":{…}}`).
    public func sendUpstream(_ message: JSONValue) {
        let text = "<message><gcm xmlns=\"google:mobile:data\">\(XMLEscaping.escapeText(message.encoded()))</gcm></message>"
        channel.writeAndFlush(ByteBuffer(string: text), promise: nil)
    }
}

/// The client side of the device channel: stream, SASL PLAIN with the device credentials, bind, then
/// messages in and ACKs out.
final class DeviceClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let credentials: DeviceCredentials
    let onEvent: @Sendable (DeviceEvent) -> Void
    let bound: EventLoopPromise<Void>
    let parser = XMLStreamParser(limits: .postAuth)
    var login: ClientLogin
    var context: ChannelHandlerContext?
    var disconnectReason: String?
    var closingByClient = false

    init(credentials: DeviceCredentials, bound: EventLoopPromise<Void>, onEvent: @escaping @Sendable (DeviceEvent) -> Void) {
        self.credentials = credentials
        self.bound = bound
        self.onEvent = onEvent
        login = ClientLogin(domain: "devices.ccs-emulator", plain: "\0\(credentials.deviceID)\0\(credentials.secret)",
                            resource: "device")
        parser.pauseAfter = ClientLogin.pausesParser(after:)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func channelActive(context: ChannelHandlerContext) {
        send(login.streamHeader)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        onEvent(.disconnected(reason: disconnectReason))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if disconnectReason == nil && !closingByClient { disconnectReason = "\(error)" }
        context.close(promise: nil)
    }

    /// The device ends the session: the server's closing tag that follows is no surprise.
    func sendClose() {
        closingByClient = true
        send("</stream:stream>")
    }

    private func send(_ text: String) {
        guard let context else { return }
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: text)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        do {
            for event in try buffer.withUnsafeReadableBytes({ try parser.feedRestarting($0) }) {
                handle(event, context: context)
            }
        } catch {
            disconnectReason = "invalid XML from the server: \(error)"
            context.close(promise: nil)
        }
    }

    private func handle(_ event: XMLStreamEvent, context: ChannelHandlerContext) {
        switch event {
        case .streamOpen:
            break
        case .streamClose:
            if !closingByClient { disconnectReason = disconnectReason ?? "the server closed the stream" }
            context.close(promise: nil)
        case .stanza(let stanza):
            for action in login.received(stanza) {
                switch action {
                case .send(let text):
                    send(text)
                case .connected:
                    onEvent(.connected)
                    bound.succeed(())
                case .refused(let reason):
                    disconnectReason = "authentication failed (unknown device, wrong secret, or app uninstalled): \(reason)"
                    context.close(promise: nil)
                case .fail(let reason):
                    disconnectReason = reason
                    context.close(promise: nil)
                case .stanza(let stanza):
                    sessionStanza(stanza)
                }
            }
        }
    }

    /// After the bind: messages for the app (ACKed) and answers to upstream messages.
    private func sessionStanza(_ stanza: XMLElement) {
        guard stanza.name == "message", stanza.attribute("type") != "error",
              let gcm = stanza.firstChild(named: "gcm", namespace: "google:mobile:data"),
              let json = try? JSONValue.parse(gcm.text), case .object(let fields) = json else { return }
        // Answers to upstream messages carry no stanza id and need no ACK.
        if let type = fields["message_type"]?.stringValue, type == "sent" || type == "send_error",
           stanza.attribute("id") == nil {
            onEvent(.upstreamAnswer(json))
            return
        }
        let toTray = stanza.firstChild(named: "tray", namespace: "urn:ccs-emulator:device") != nil
        let view = stanza.firstChild(named: "view", namespace: "urn:ccs-emulator:device").flatMap { try? JSONValue.parse($0.text) }
        onEvent(.message(json, toTray: toTray, view: view))
        if let id = stanza.attribute("id") ?? fields["message_id"]?.stringValue {
            let ack = JSONValue.object(["message_id": .string(id), "message_type": .string("ack")]).encoded()
            send("<message><gcm xmlns=\"google:mobile:data\">\(XMLEscaping.escapeText(ack))</gcm></message>")
        }
    }
}

public struct DeviceConnectionClosed: Error, CustomStringConvertible {
    public var description: String { "the connection closed before the session was established" }
}
