import APNsGateway
import APNsProviderAPI
import CCSEngine
import Foundation
import HTTPAPI
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresStore
import WebPushDelivery
import WebPushService
import XMPPServer

/// What `bindListeners` made: the ports so far (HTTP's are not known yet) and the web push sender.
struct BoundListeners: Sendable {
    var info: EmulatorInfo
    var webPush: WebPushDelivery?
}

/// The NIO listeners, bound one after the other before the group runs; each one bound becomes a
/// service that closes it in its phase, so a later one that cannot bind stops those already bound.
extension Emulator {
    static func bindListeners(_ config: EmulatorConfiguration, core: EmulatorCore, tls: TLSMaterial, dataDir: String,
                              group: MultiThreadedEventLoopGroup, logger: Logger,
                              services: inout ServiceList) async throws -> BoundListeners {
        if let cluster = core.cluster { try openClusterLinks(cluster, config: config, group: group) }
        let ccs = try await bindXMPP(config, core: core, tls: tls, group: group, logger: logger, services: &services)
        let apns = try await bindAPNs(config, engine: core.engine, tls: tls, group: group, logger: logger)
        services.add("apns-gateway", .stopAPNs, StopOnShutdown("apns-gateway") { await apns.shutdown() })
        let apnsHTTP2 = try await bindProviderAPI(config: config, group: group, certificatePath: tls.certificatePath,
                                                  keyPath: tls.keyPath, caPath: tls.developmentCAPath, dataDir: dataDir,
                                                  engine: core.engine, logger: logger)
        services.add("apns-http2", .stopAPNs, StopOnShutdown("apns-http2") { await apnsHTTP2.shutdown() })
        var info = EmulatorInfo(ccsPort: ccs.ccsPort, devicePort: ccs.devicePort, httpPort: 0,
                                caCertPath: tls.caPath, caCertPEM: tls.caPEM, dataDir: dataDir)
        info.ccsPreprodPort = ccs.preprodPort
        info.apnsPort = apns.gatewayPort
        info.apnsFeedbackPort = apns.feedbackPort
        info.apnsHTTP2Port = apnsHTTP2.port
        let webPush = try makeWebPush(config, engine: core.engine, dataDir: dataDir, group: group, logger: logger)
        if let webPush {
            info.vapidPublicKey = webPush.vapidPublicKey
            // Started once the start has finished (`launch`): a failed start pushes nothing.
            services.add("web-push", .closeConnections, StopOnShutdown("web-push") { await webPush.delivery.shutdown() })
        }
        return BoundListeners(info: info, webPush: webPush?.delivery)
    }

    /// This node's links to the other nodes (closed when the node leaves the cluster).
    static func openClusterLinks(_ cluster: PostgresCluster, config: EmulatorConfiguration,
                                 group: MultiThreadedEventLoopGroup) throws {
        let wildcard = ["0.0.0.0", "::", "[::]"].contains(config.bindHost)
        let advertised = config.clusterHost ?? (wildcard ? ProcessInfo.processInfo.hostName : config.bindHost)
        do {
            try cluster.openLinks(group: group, bind: config.bindHost, port: config.clusterPort, advertised: advertised,
                                  handshakeTimeout: .milliseconds(Int64(config.requestTimeoutMillis)))
        } catch {
            throw ListenerError(error, option: "--cluster-port", port: config.clusterPort, host: config.bindHost)
        }
    }

    /// The CCS listener (and pre-production's, the same service on another port) and the device channel.
    static func bindXMPP(_ config: EmulatorConfiguration, core: EmulatorCore, tls: TLSMaterial,
                         group: MultiThreadedEventLoopGroup, logger: Logger,
                         services: inout ServiceList) async throws -> (ccsPort: Int, preprodPort: Int?, devicePort: Int) {
        let mailboxes = LoopMailboxes(group: group)
        func bind(_ option: String, port: Int, role: ConnectionRole, configuration: XMPPServerConfiguration) async throws -> Int {
            let channel: any Channel
            do {
                channel = try await XMPPListener.bind(group: group, host: config.bindHost, port: port, tls: tls.context,
                                                      role: role, engine: core.engine, configuration: configuration,
                                                      logger: logger, mailboxes: mailboxes)
            } catch {
                throw ListenerError(error, option: option, port: port, host: config.bindHost)
            }
            services.add(option, .stopAccepting, StopOnShutdown(option) { try? await channel.close() })
            return channel.localAddress?.port ?? 0
        }
        let ccs = try await bind("--ccs-port", port: config.ccsPort, role: .appServer, configuration: config.xmpp)
        let preprod = try await config.ccsPreprodPort.asyncMap {
            try await bind("--ccs-preprod-port", port: $0, role: .appServer, configuration: config.xmpp)
        }
        // The device channel names the CCS port to an app server that logs in there by mistake.
        var deviceChannel = config.xmpp
        deviceChannel.appServerPort = ccs
        let device = try await bind("--device-port", port: config.devicePort, role: .device, configuration: deviceChannel)
        return (ccs, preprod, device)
    }

    /// The APNs binary gateway and its feedback service; a feedback port that cannot be bound closes
    /// the gateway just bound.
    static func bindAPNs(_ config: EmulatorConfiguration, engine: Engine, tls: TLSMaterial,
                         group: MultiThreadedEventLoopGroup, logger: Logger) async throws -> APNsServer {
        var apnsConfig = config.apns
        apnsConfig.host = config.bindHost
        apnsConfig.handshakeTimeout = .milliseconds(Int64(config.requestTimeoutMillis))
        let pending: APNsServer.PendingGateway
        do {
            pending = try await APNsServer.bindGateway(group: group, tls: tls.apns, configuration: apnsConfig,
                                                       engine: engine, logger: logger)
        } catch {
            throw ListenerError(error, option: "--apns-port", port: apnsConfig.gatewayPort, host: config.bindHost)
        }
        do {
            return try await pending.start(group: group, tls: tls.apns, configuration: apnsConfig, engine: engine, logger: logger)
        } catch {
            try? await pending.channel.close()
            throw ListenerError(error, option: "--apns-feedback-port", port: apnsConfig.feedbackPort, host: config.bindHost)
        }
    }

    /// The web push sender (`--web-push on`), with its VAPID key (made once, kept in DATA_DIR/tls).
    static func makeWebPush(_ config: EmulatorConfiguration, engine: Engine, dataDir: String,
                            group: MultiThreadedEventLoopGroup,
                            logger: Logger) throws -> (delivery: WebPushDelivery, vapidPublicKey: String)? {
        guard config.webPush else { return nil }
        try FileManager.default.createDirectory(atPath: dataDir + "/tls", withIntermediateDirectories: true)
        let vapid = try VAPIDKey.ensure(at: dataDir + "/tls/vapid-key.pem")
        let roots: [NIOSSLCertificate]
        do { roots = try config.webPushCAPath.map { try NIOSSLCertificate.fromPEMFile($0) } ?? [] } catch {
            throw ConfigurationError("--web-push-ca \(config.webPushCAPath ?? ""): not a PEM certificate file (\(error))")
        }
        let delivery = WebPushDelivery(engine: engine, vapid: vapid, group: group, logger: logger, extraTrustRoots: roots)
        return (delivery, vapid.publicKeyBase64URL)
    }
}

extension Optional {
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
