import APNsGateway
import Crypto
import Foundation
import SwiftASN1
import X509

/// `ccs-emulator apns-cert`: an APNs provider certificate from the development CA, named as Apple
/// named them, the bundle id in the subject UID (where the gateway reads the push topic).
public struct ProviderCertificateFiles: Sendable {
    public var certificatePath: String
    public var keyPath: String
    public var combinedPath: String
    public var subject: String
}

extension DevelopmentCA {
    public static func issueProviderCertificate(bundleID: String, sandbox: Bool, dataDirectory: String,
                                                outputDirectory: String) throws -> ProviderCertificateFiles {
        let tlsDirectory = dataDirectory + "/tls"
        let ca = try ensure(in: tlsDirectory)
        let caKey = try P256.Signing.PrivateKey(pemRepresentation: String(contentsOfFile: tlsDirectory + "/ca-key.pem", encoding: .utf8))
        let caCert = try Certificate(pemEncoded: String(contentsOfFile: ca.caCertPath, encoding: .utf8))
        let now = Date()
        let key = P256.Signing.PrivateKey()
        let commonName = (sandbox ? "Apple Development IOS Push Services: " : "Apple Push Services: ") + bundleID
        let subject = DistinguishedName([
            RelativeDistinguishedName(.init(type: ProviderCertificate.uidOID, utf8String: bundleID)),
            RelativeDistinguishedName(.init(type: .RDNAttributeType.commonName, utf8String: commonName)),
            RelativeDistinguishedName(.init(type: .RDNAttributeType.organizationName, utf8String: "ccs-emulator")),
        ])
        let cert = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(365 * 86400),
            issuer: caCert.subject, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.clientAuth])
                SubjectKeyIdentifier(hash: key.publicKey)
            },
            issuerPrivateKey: .init(caKey))
        try FileManager.default.createDirectory(atPath: outputDirectory, withIntermediateDirectories: true)
        let files = ProviderCertificateFiles(certificatePath: outputDirectory + "/cert.pem",
                                             keyPath: outputDirectory + "/key.pem",
                                             combinedPath: outputDirectory + "/combined.pem",
                                             subject: "UID=\(bundleID), CN=\(commonName), O=ccs-emulator")
        let certPEM = try cert.serializeAsPEM().pemString
        try writeFile(certPEM, to: files.certificatePath, private: false)
        try writeFile(key.pemRepresentation, to: files.keyPath, private: true)
        // Some libraries take one file with both (pushjack, PyAPNs' cert_file without key_file).
        try writeFile(certPEM + "\n" + key.pemRepresentation, to: files.combinedPath, private: true)
        return files
    }
}
