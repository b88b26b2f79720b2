import APNsProviderAPI
import Crypto
import Foundation

/// `ccs-emulator apns-key` (and `POST /emulator/v1/apns/keys`): a P-256 token-signing key as Apple's
/// developer portal makes one. The provider gets the private key as the `.p8` file (PKCS#8 PEM) it
/// loads unchanged; the emulator keeps the public half in DATA_DIR/apns-keys to verify its tokens.
public enum ProviderKeyIssuer {
    public struct Issued: Sendable {
        public var key: ProviderKey
        /// The `.p8` file's contents.
        public var p8PEM: String
    }

    public static func issue(teamID: String, keyID: String, topics: [String], environment: KeyEnvironment,
                             dataDirectory: String) throws -> Issued {
        guard ProviderKey.isIdentifier(teamID), ProviderKey.isIdentifier(keyID) else {
            throw ConfigurationError("--team-id and --key-id are 10 upper-case letters or digits, as Apple issues them")
        }
        let store = ProviderKeyStore(directory: Emulator.providerKeysDirectory(dataDirectory))
        if store.key(id: keyID) != nil {
            throw ConfigurationError("a key with id \(keyID) exists already in \(store.directory)")
        }
        let privateKey = P256.Signing.PrivateKey()
        let key = ProviderKey(keyID: keyID, teamID: teamID, topics: topics, environment: environment,
                              publicKey: privateKey.publicKey)
        try store.register(key)
        return Issued(key: key, p8PEM: privateKey.pemRepresentation)
    }

    /// Writes the `.p8` private key, 0600.
    public static func write(_ issued: Issued, to path: String) throws {
        try DevelopmentCA.writeFile(issued.p8PEM, to: path, private: true)
    }
}
