import NIOSSL
import SwiftASN1
import X509

/// What a provider certificate says: Apple put the app's bundle id, the push topic, in the subject's
/// UID (`UID=com.example.app, CN=Apple Push Services: com.example.app, …`).
public enum ProviderCertificate {
    /// userId, RFC 4519: 0.9.2342.19200300.100.1.1.
    public static let uidOID: ASN1ObjectIdentifier = [0, 9, 2342, 19200300, 100, 1, 1]
    /// Apple's bundle ids stay well below this; a longer topic is status 6.
    public static let maximumTopicLength = 255

    public static func topic(of certificate: NIOSSLCertificate?) -> GatewayConnection.Topic {
        guard let certificate, let der = try? certificate.toDERBytes(),
              let parsed = try? Certificate(derEncoded: der) else { return .missing }
        return topic(of: parsed)
    }

    public static func topic(of certificate: Certificate) -> GatewayConnection.Topic {
        for rdn in certificate.subject {
            for attribute in rdn where attribute.type == uidOID {
                guard let uid = String(attribute.value) else { return .invalidSize }
                if uid.isEmpty || uid.utf8.count > maximumTopicLength { return .invalidSize }
                return .bundleID(uid)
            }
        }
        return .missing
    }
}
