import APNsProviderAPI
import CCSEngine
import Logging
import NIOCore
import NIOPosix
import NIOSSL

extension Emulator {
    /// The APNs HTTP/2 provider API listener: the server certificate the other TLS listeners present,
    /// provider certificates from the development CA, the signing keys of DATA_DIR/apns-keys.
    static func bindProviderAPI(config: EmulatorConfiguration, group: MultiThreadedEventLoopGroup, certificatePath: String,
                                keyPath: String, caPath: String, dataDir: String, engine: Engine,
                                logger: Logger) async throws -> ProviderServer {
        var configuration = config.apnsHTTP2
        configuration.host = config.bindHost
        configuration.handshakeTimeout = .milliseconds(Int64(config.requestTimeoutMillis))
        let tls = ProviderServer.tlsConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificatePath),
            privateKey: try NIOSSLPrivateKey(file: keyPath, format: .pem),
            trustRoots: try NIOSSLCertificate.fromPEMFile(caPath))
        do {
            return try await ProviderServer.bind(group: group, tls: tls, configuration: configuration, engine: engine,
                                                 keys: ProviderKeyStore(directory: providerKeysDirectory(dataDir)),
                                                 logger: logger)
        } catch {
            throw ListenerError(error, option: "--apns-http2-port", port: configuration.port, host: config.bindHost)
        }
    }

    /// Where the signing keys' public halves are kept (`ccs-emulator apns-key` writes there).
    public static func providerKeysDirectory(_ dataDir: String) -> String { dataDir + "/apns-keys" }
}
