import Crypto
import Foundation
import SwiftASN1
import X509

/// The development CA and server certificate made in the data directory when no `--tls-cert` is given.
/// Kept across restarts, so a client that trusts the CA once keeps trusting the emulator.
public struct DevelopmentCA: Sendable {
    /// Names in the server certificate: the loopback names and every CCS host name real clients dial.
    public static let serverNames = ["localhost", "fcm-xmpp.googleapis.com", "gcm.googleapis.com",
                                     "gcm-xmpp.googleapis.com", "gcm-preprod.googleapis.com",
                                     "fcm.googleapis.com", "gcm-http.googleapis.com", "iid.googleapis.com"]
    public static let serverAddresses: [[UInt8]] = [[127, 0, 0, 1], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]]

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
            let name = try DistinguishedName {
                OrganizationName("ccs-emulator")
                CommonName("ccs-emulator development CA")
            }
            caCert = try Certificate(
                version: .v3, serialNumber: .init(), publicKey: .init(caKey.publicKey),
                notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(10 * 365 * 86400),
                issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                    SubjectKeyIdentifier(hash: caKey.publicKey)
                },
                issuerPrivateKey: .init(caKey))
            try write(caKey.pemRepresentation, to: caKeyPath, private: true)
            try write(try caCert.serializeAsPEM().pemString, to: ca.caCertPath, private: false)
            try? fm.removeItem(atPath: ca.serverCertPath)
        }

        if !fm.fileExists(atPath: ca.serverCertPath) || !fm.fileExists(atPath: ca.serverKeyPath) {
            let key = P256.Signing.PrivateKey()
            let subject = try DistinguishedName {
                OrganizationName("ccs-emulator")
                CommonName("localhost")
            }
            var names: [GeneralName] = serverNames.map { .dnsName($0) }
            names += serverAddresses.map { .ipAddress(ASN1OctetString(contentBytes: ArraySlice($0))) }
            let cert = try Certificate(
                version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
                notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(2 * 365 * 86400),
                issuer: caCert.subject, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.notCertificateAuthority)
                    Critical(KeyUsage(digitalSignature: true, keyEncipherment: true))
                    try ExtendedKeyUsage([.serverAuth])
                    SubjectAlternativeNames(names)
                    SubjectKeyIdentifier(hash: key.publicKey)
                },
                issuerPrivateKey: .init(caKey))
            try write(key.pemRepresentation, to: ca.serverKeyPath, private: true)
            try write(try cert.serializeAsPEM().pemString, to: ca.serverCertPath, private: false)
        }
        return ca
    }

    private static func write(_ text: String, to path: String, private: Bool) throws {
        try (text + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        if `private` { chmod(path, 0o600) }
    }
}

extension SubjectKeyIdentifier {
    init(hash key: P256.Signing.PublicKey) {
        let digest = Insecure.SHA1.hash(data: key.x963Representation)
        self.init(keyIdentifier: ArraySlice(digest))
    }
}
