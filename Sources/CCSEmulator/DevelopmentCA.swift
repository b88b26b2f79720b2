import Crypto
import Foundation
import Logging
import SwiftASN1
import X509

/// The development CA and server certificate made in the data directory when no `--tls-cert` is given.
/// Kept across restarts, so a client that trusts the CA once keeps trusting the emulator.
public struct DevelopmentCA: Sendable {
    /// Names in the server certificate: the loopback names and every CCS host name real clients dial.
    public static let serverNames = ["localhost", "fcm-xmpp.googleapis.com", "gcm.googleapis.com",
                                     "gcm-xmpp.googleapis.com", "gcm-preprod.googleapis.com",
                                     "fcm.googleapis.com", "gcm-http.googleapis.com", "iid.googleapis.com",
                                     // Proxy mode: the HTTPS hosts an unmodified SDK dials.
                                     "oauth2.googleapis.com", "iamcredentials.googleapis.com",
                                     "android.googleapis.com",
                                     // APNs' HTTP/2 provider API (docs/apns.md).
                                     "api.push.apple.com", "api.sandbox.push.apple.com",
                                     "api.development.push.apple.com"]
    public static let serverAddresses: [[UInt8]] = [[127, 0, 0, 1], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]]

    /// What a CA made here may issue for (NameConstraints, RFC 5280 §4.2.1.10): trusting it must not
    /// let it vouch for any other site. The DNS subtrees are exactly the names served (a dNSName
    /// constraint also admits names below it, none of which is served).
    ///
    /// IP addresses are not constrained, although the RFC allows it: BoringSSL (swift-nio-ssl, so the
    /// device simulator and every Swift client) fails every chain whose CA has an iPAddress constraint,
    /// permitted or excluded (`crypto/x509/v3_ncons.cc` answers X509_V_ERR_UNSUPPORTED_CONSTRAINT_TYPE;
    /// tried with 127.0.0.0/8 and ::1/128: CERTIFICATE_VERIFY_FAILED, while OpenSSL accepts it). What
    /// stands in its place is the CA key's privacy: 0600 in a 0700 data directory (docs/hardening.md).
    public static let permittedDNSDomains = serverNames

    static var nameConstraints: NameConstraints {
        NameConstraints(permittedDNSDomains: permittedDNSDomains)
    }

    /// Warns when the CA in the data directory predates its constraints: it is kept, since clients
    /// trust it, but the user learns how to replace it.
    func warnIfMadeBeforeItsConstraints(logger: Logger) {
        guard let pem = try? String(contentsOfFile: caCertPath, encoding: .utf8),
              let ca = try? Certificate(pemEncoded: pem), !Self.isConstrainedAsNow(ca) else { return }
        let directory = (caCertPath as NSString).deletingLastPathComponent
        logger.warning("the development CA \(caCertPath) was made by an older version: it may issue for all of google.com, or its names leave out APNs' api.push.apple.com hosts (the HTTP/2 provider API is then reached as localhost only); to replace it with one limited to exactly the names served, stop the emulator, remove \(directory), start again and trust the new ca.pem (docs/hardening.md, docs/apns.md)")
    }

    /// Whether `ca` has the constraints a CA made by this version has (one made before may issue for
    /// all of google.com: it is kept, so clients keep trusting it, with a warning).
    public static func isConstrainedAsNow(_ ca: Certificate) -> Bool {
        (try? ca.extensions.nameConstraints) == nameConstraints
    }

    /// A server certificate this close to its end is issued anew at start.
    static let renewalMargin: TimeInterval = 30 * 86400

    public let caCertPath: String
    public let serverCertPath: String
    public let serverKeyPath: String

    /// Loads the files in `directory`, creating whatever is missing.
    public static func ensure(in directory: String) throws -> DevelopmentCA {
        let fm = FileManager.default
        try fm.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let ca = DevelopmentCA(caCertPath: directory + "/ca.pem", serverCertPath: directory + "/server.pem",
                               serverKeyPath: directory + "/server-key.pem")
        let caKeyPath = directory + "/ca-key.pem"
        let now = Date()

        let caKey: P256.Signing.PrivateKey
        let caCert: Certificate
        if fm.fileExists(atPath: ca.caCertPath), fm.fileExists(atPath: caKeyPath) {
            caKey = try P256.Signing.PrivateKey(pemRepresentation: String(contentsOfFile: caKeyPath, encoding: .utf8))
            caCert = try Certificate(pemEncoded: String(contentsOfFile: ca.caCertPath, encoding: .utf8))
        } else {
            caKey = P256.Signing.PrivateKey()
            caCert = try makeCACertificate(key: caKey, now: now)
            try write(caKey.pemRepresentation, to: caKeyPath, private: true)
            try write(try caCert.serializeAsPEM().pemString, to: ca.caCertPath, private: false)
            try? fm.removeItem(atPath: ca.serverCertPath)
        }

        if !fm.fileExists(atPath: ca.serverCertPath) || !fm.fileExists(atPath: ca.serverKeyPath)
            || !serverCertificateIsCurrent(at: ca.serverCertPath, issuer: caCert, now: now) {
            let key = P256.Signing.PrivateKey()
            let cert = try makeServerCertificate(key: key, issuer: caCert, issuerKey: caKey, now: now)
            try write(key.pemRepresentation, to: ca.serverKeyPath, private: true)
            try write(try cert.serializeAsPEM().pemString, to: ca.serverCertPath, private: false)
        }
        return ca
    }

    /// The CA: ten years, name-constrained to the names and addresses the emulator serves.
    static func makeCACertificate(key caKey: P256.Signing.PrivateKey, now: Date) throws -> Certificate {
        let name = try DistinguishedName {
            OrganizationName("ccs-emulator")
            CommonName("ccs-emulator development CA")
        }
        return try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(caKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(10 * 365 * 86400),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                Critical(nameConstraints)
                SubjectKeyIdentifier(hash: caKey.publicKey)
            },
            issuerPrivateKey: .init(caKey))
    }

    /// The server certificate: two years, every name the emulator serves under `issuer`'s constraints.
    static func makeServerCertificate(key: P256.Signing.PrivateKey, issuer caCert: Certificate,
                                      issuerKey caKey: P256.Signing.PrivateKey, now: Date) throws -> Certificate {
        let subject = try DistinguishedName {
            OrganizationName("ccs-emulator")
            CommonName("localhost")
        }
        var names: [GeneralName] = servedNames(under: caCert).map { .dnsName($0) }
        names += serverAddresses.map { .ipAddress(ASN1OctetString(contentBytes: ArraySlice($0))) }
        return try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(2 * 365 * 86400),
            issuer: caCert.subject, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                // ECDSA keys sign; they cannot encipher (RFC 5480 §3), so no keyEncipherment.
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
                SubjectKeyIdentifier(hash: key.publicKey)
            },
            issuerPrivateKey: .init(caKey))
    }

    /// Whether the server certificate at `path` was issued by `issuer`, covers every name the emulator
    /// serves today, and is not near its end. A certificate from an older version (fewer names) or
    /// another CA is replaced at start, keeping the CA that clients trust.
    static func serverCertificateIsCurrent(at path: String, issuer: Certificate, now: Date) -> Bool {
        guard let pem = try? String(contentsOfFile: path, encoding: .utf8),
              let cert = try? Certificate(pemEncoded: pem),
              cert.issuer == issuer.subject,
              cert.notValidAfter > now.addingTimeInterval(renewalMargin),
              let sans = try? cert.extensions.subjectAlternativeNames else { return false }
        var dns: Set<String> = [], ips: Set<[UInt8]> = []
        for name in sans {
            switch name {
            case .dnsName(let n): dns.insert(n)
            case .ipAddress(let a): ips.insert(Array(a.bytes))
            default: break
            }
        }
        return Set(servedNames(under: issuer)).isSubset(of: dns) && Set(serverAddresses).isSubset(of: ips)
    }

    /// The server names a certificate from `ca` may carry: a CA made by an older version is constrained
    /// to the names served then, and one name outside its constraints would fail the whole chain, so
    /// names added since (APNs' hosts) are left out until the CA is made anew (the start warns).
    static func servedNames(under ca: Certificate) -> [String] {
        guard let constraints = try? ca.extensions.nameConstraints else { return serverNames }
        let permitted = constraints.permittedDNSDomains
        guard !permitted.isEmpty else { return serverNames }
        return serverNames.filter { name in permitted.contains { name == $0 || name.hasSuffix("." + $0) } }
    }

    /// Writes through a temporary file renamed into place. A private key's file is created with mode
    /// 0600, so the key is never readable by others, not even for a moment.
    static func writeFile(_ text: String, to path: String, private: Bool) throws {
        try write(text, to: path, private: `private`)
    }

    private static func write(_ text: String, to path: String, private: Bool) throws {
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, `private` ? 0o600 : 0o644)
        guard fd >= 0 else { throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: temporary]) }
        if `private` { fchmod(fd, 0o600) }  // the mode above is masked by the umask; this is not
        let bytes = Array((text + "\n").utf8)
        let written = bytes.withUnsafeBytes { posixWrite(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
    }
}

extension SubjectKeyIdentifier {
    init(hash key: P256.Signing.PublicKey) {
        let digest = Insecure.SHA1.hash(data: key.x963Representation)
        self.init(keyIdentifier: ArraySlice(digest))
    }
}

/// The system's write(2); inside `DevelopmentCA` the name `write` is the type's own.
private func posixWrite(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    write(fd, buffer, count)
}
