import APNsGateway
import Foundation
import Logging
import NIOSSL

/// The certificates every TLS listener presents: `--tls-cert`/`--tls-key`, or the development CA's;
/// the APNs listeners also trust provider certificates from the development CA.
struct TLSMaterial: Sendable {
    let certificatePath: String
    let keyPath: String
    /// The CA clients trust (the ready line's `ca_cert`): the given certificate, or the development CA.
    let caPath: String
    let caPEM: String
    /// The development CA, issuer of APNs provider certificates, whichever certificate the server presents.
    let developmentCAPath: String
    /// The HTTPS listener's configuration (HTTP/2 by ALPN is added by its channel).
    let server: TLSConfiguration
    /// The XMPP listeners' context.
    let context: NIOSSLContext
    let apns: APNsServer.TLS

    static func load(_ config: EmulatorConfiguration, dataDir: String, logger: Logger) throws -> TLSMaterial {
        let certPath: String, keyPath: String, caPath: String
        if let c = config.tlsCertificatePath, let k = config.tlsKeyPath {
            (certPath, keyPath, caPath) = (c, k, c)
        } else if config.tlsCertificatePath != nil || config.tlsKeyPath != nil {
            throw ConfigurationError("--tls-cert and --tls-key go together")
        } else {
            let ca = try DevelopmentCA.ensure(in: dataDir + "/tls")
            (certPath, keyPath, caPath) = (ca.serverCertPath, ca.serverKeyPath, ca.caCertPath)
        }
        var server = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certPath).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: keyPath, format: .pem)))
        server.minimumTLSVersion = .tlsv12
        // A peer that never answers our close_notify must not hold a closed session for long.
        server.shutdownTimeout = .seconds(1)
        let developmentCA = try DevelopmentCA.ensure(in: dataDir + "/tls")
        developmentCA.warnIfMadeBeforeItsConstraints(logger: logger)
        let apns = try APNsServer.TLS(configuration: APNsServer.tlsConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certPath),
            privateKey: try NIOSSLPrivateKey(file: keyPath, format: .pem),
            trustRoots: try NIOSSLCertificate.fromPEMFile(developmentCA.caCertPath),
            allowTLS1: config.apns.allowTLS1))
        return TLSMaterial(certificatePath: certPath, keyPath: keyPath, caPath: caPath,
                           caPEM: (try? String(contentsOfFile: caPath, encoding: .utf8)) ?? "",
                           developmentCAPath: developmentCA.caCertPath, server: server,
                           context: try NIOSSLContext(configuration: server), apns: apns)
    }
}
