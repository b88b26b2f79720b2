import NIOSSL

/// TLS on the links between cluster nodes, keyed by the secret each node already publishes for its
/// listener (TLS 1.2 with a pre-shared key, ECDHE-PSK-CHACHA20-POLY1305: forward-secret, and no
/// certificate to distribute, since every node makes its own CA). Whoever can read the database can
/// link, as before; whoever can only see the network can neither read nor forge a link's frames.
enum NodeLinkTLS {
    /// The PSK identity a linking node names (the key is the listener's secret, whoever links).
    static let identity = "ccs-emulator-node"
    static let cipherSuites = "ECDHE-PSK-CHACHA20-POLY1305"

    static func listenerContext(secret: String) throws -> NIOSSLContext {
        var configuration = base()
        let key = NIOSSLSecureBytes(secret.utf8)
        configuration.pskHint = "ccs-emulator"
        configuration.pskServerProvider = { _ in PSKServerIdentityResponse(key: key) }
        return try NIOSSLContext(configuration: configuration)
    }

    static func linkContext(secret: String) throws -> NIOSSLContext {
        var configuration = base()
        let key = NIOSSLSecureBytes(secret.utf8)
        configuration.pskClientProvider = { _ in PSKClientIdentityResponse(key: key, identity: identity) }
        return try NIOSSLContext(configuration: configuration)
    }

    private static func base() -> TLSConfiguration {
        var configuration = TLSConfiguration.makePreSharedKeyConfiguration()
        // BoringSSL offers pre-shared keys (of this kind) in TLS 1.2 only.
        configuration.minimumTLSVersion = .tlsv12
        configuration.maximumTLSVersion = .tlsv12
        configuration.cipherSuites = cipherSuites
        return configuration
    }
}
