import APNsGateway
import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import Testing
import X509
@testable import APNsProviderAPI

/// What a client certificate makes of a connection: the bundle id from the subject UID, and whether
/// its common name marks it as a development (sandbox-only) certificate, as `apns-cert` names them.
@Suite struct ProviderCertificateMethodTests {
    static func certificate(uid: String?, commonName: String) throws -> NIOSSLCertificate {
        let key = P256.Signing.PrivateKey()
        var rdns: [RelativeDistinguishedName] = []
        if let uid { rdns.append(RelativeDistinguishedName(.init(type: ProviderCertificate.uidOID, utf8String: uid))) }
        rdns.append(RelativeDistinguishedName(.init(type: .RDNAttributeType.commonName, utf8String: commonName)))
        let subject = DistinguishedName(rdns)
        let now = Date()
        let cert = try Certificate(version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
                                   notValidBefore: now.addingTimeInterval(-60), notValidAfter: now.addingTimeInterval(3600),
                                   issuer: subject, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
                                   extensions: .init(), issuerPrivateKey: .init(key))
        var serializer = DER.Serializer()
        try serializer.serialize(cert)
        return try NIOSSLCertificate(bytes: serializer.serializedBytes, format: .der)
    }

    @Test func methods() throws {
        #expect(ProviderConnectionHandler.method(nil) == .token)
        let production = try Self.certificate(uid: "com.example.app", commonName: "Apple Push Services: com.example.app")
        #expect(ProviderConnectionHandler.method(production)
                == .certificate(.init(bundleID: "com.example.app", sandboxOnly: false)))
        let development = try Self.certificate(uid: "com.example.app",
                                               commonName: "Apple Development IOS Push Services: com.example.app")
        #expect(ProviderConnectionHandler.method(development)
                == .certificate(.init(bundleID: "com.example.app", sandboxOnly: true)))
        let noUID = try Self.certificate(uid: nil, commonName: "somebody")
        #expect(ProviderConnectionHandler.method(noUID) == .certificate(.init(bundleID: nil, sandboxOnly: false)))
    }
}
