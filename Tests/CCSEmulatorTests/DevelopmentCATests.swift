import CCSEmulator
import Crypto
import Foundation
import SwiftASN1
import Testing
import X509

@Suite struct DevelopmentCATests {
    static func directory() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ccs-ca-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    static func certificate(_ path: String) throws -> Certificate {
        try Certificate(pemEncoded: String(contentsOfFile: path, encoding: .utf8))
    }

    static func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    @Test func theCAIsConstrainedToTheNamesItServesAndKeysArePrivate() throws {
        let dir = try Self.directory()
        let ca = try DevelopmentCA.ensure(in: dir)
        let root = try Self.certificate(ca.caCertPath)
        let constraints = try #require(try root.extensions.nameConstraints)
        #expect(Set(constraints.permittedDNSDomains) == Set(DevelopmentCA.permittedDNSDomains))
        // Exactly the names served: not all of google.com or googleapis.com.
        #expect(Set(DevelopmentCA.permittedDNSDomains) == Set(DevelopmentCA.serverNames))
        #expect(!constraints.permittedDNSDomains.contains("google.com") && !constraints.permittedDNSDomains.contains("googleapis.com"))
        #expect(DevelopmentCA.isConstrainedAsNow(root))
        for name in DevelopmentCA.serverNames {
            #expect(DevelopmentCA.permittedDNSDomains.contains { name == $0 || name.hasSuffix("." + $0) }, "\(name)")
        }
        #expect(try Self.mode(dir + "/ca-key.pem") == 0o600)
        #expect(try Self.mode(ca.serverKeyPath) == 0o600)
        let server = try Self.certificate(ca.serverCertPath)
        let usage = try #require(try server.extensions.keyUsage)
        #expect(usage.digitalSignature)
        #expect(!usage.keyEncipherment)  // an ECDSA key cannot encipher
    }

    @Test func aServerCertificateThatNoLongerCoversEveryNameIsIssuedAgainFromTheSameCA() throws {
        let dir = try Self.directory()
        let first = try DevelopmentCA.ensure(in: dir)
        let caPEM = try String(contentsOfFile: first.caCertPath, encoding: .utf8)
        // An older server certificate: the CA's own certificate stands in for one without the names.
        try FileManager.default.removeItem(atPath: first.serverCertPath)
        try FileManager.default.copyItem(atPath: first.caCertPath, toPath: first.serverCertPath)
        let again = try DevelopmentCA.ensure(in: dir)
        #expect(try String(contentsOfFile: again.caCertPath, encoding: .utf8) == caPEM)
        let sans = try #require(try Self.certificate(again.serverCertPath).extensions.subjectAlternativeNames)
        let dns = sans.compactMap { if case .dnsName(let n) = $0 { return n } else { return nil } }
        #expect(Set(DevelopmentCA.serverNames).isSubset(of: Set(dns)))
    }

    /// A CA made before APNs' hosts were served is constrained to the Google names: a server
    /// certificate naming api.push.apple.com would fail its whole chain, so those names are left out.
    @Test func aCAConstrainedBeforeTheAPNsHostsIssuesOnlyTheNamesItPermits() throws {
        let dir = try Self.directory()
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("older ccs-emulator development CA") }
        let older = DevelopmentCA.serverNames.filter { !$0.hasSuffix("apple.com") }
        let now = Date()
        let ca = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(86400),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                Critical(NameConstraints(permittedDNSDomains: older))
            },
            issuerPrivateKey: .init(key))
        try (ca.serializeAsPEM().pemString + "\n").write(toFile: dir + "/ca.pem", atomically: true, encoding: .utf8)
        try (key.pemRepresentation + "\n").write(toFile: dir + "/ca-key.pem", atomically: true, encoding: .utf8)
        let made = try DevelopmentCA.ensure(in: dir)
        #expect(!DevelopmentCA.isConstrainedAsNow(ca))
        let sans = try #require(try Self.certificate(made.serverCertPath).extensions.subjectAlternativeNames)
        var dns: Set<String> = []
        for case .dnsName(let n) in sans { dns.insert(n) }
        #expect(dns == Set(older))
        #expect(!dns.contains("api.push.apple.com"))
        // Kept at the next start: it covers every name this CA may vouch for.
        let again = try DevelopmentCA.ensure(in: dir)
        #expect(try Self.certificate(again.serverCertPath) == Self.certificate(made.serverCertPath))
    }

    @Test func aCurrentServerCertificateIsKept() throws {
        let dir = try Self.directory()
        let first = try DevelopmentCA.ensure(in: dir)
        let pem = try String(contentsOfFile: first.serverCertPath, encoding: .utf8)
        _ = try DevelopmentCA.ensure(in: dir)
        #expect(try String(contentsOfFile: first.serverCertPath, encoding: .utf8) == pem)
    }
}
