import Crypto
import PushDomain

/// Which APNs environment a signing key may push to (Apple lets a key be limited to one).
public enum KeyEnvironment: String, Sendable, CaseIterable {
    case sandbox
    case production
    case both

    public func allows(_ environment: ProviderEnvironment) -> Bool {
        switch self {
        case .both: return true
        case .sandbox: return environment == .sandbox
        case .production: return environment == .production
        }
    }
}

/// The environment a request reached, from the host it named (`:authority`).
public enum ProviderEnvironment: String, Sendable {
    case sandbox
    case production

    /// api.push.apple.com is production; the sandbox names, localhost and addresses (a test that
    /// dials the port directly) are the development environment, where tests belong (docs/apns.md).
    public init(authority: String?) {
        let host = (authority ?? "").split(separator: ":").first.map { $0.lowercased() } ?? ""
        self = host == "api.push.apple.com" ? .production : .sandbox
    }
}

/// A token-signing key the emulator knows: what `ccs-emulator apns-key` made (the private half went
/// to the provider's `.p8` file).
public struct ProviderKey: Sendable, Equatable {
    public var keyID: String
    public var teamID: String
    /// Empty: a team-scoped key (every topic of the team). Otherwise the bundle ids it may push to.
    public var topics: [String]
    public var environment: KeyEnvironment
    public var publicKey: P256.Signing.PublicKey

    public init(keyID: String, teamID: String, topics: [String], environment: KeyEnvironment,
                publicKey: P256.Signing.PublicKey) {
        self.keyID = keyID
        self.teamID = teamID
        self.topics = topics
        self.environment = environment
        self.publicKey = publicKey
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.keyID == b.keyID && a.teamID == b.teamID && a.topics == b.topics && a.environment == b.environment
            && a.publicKey.rawRepresentation == b.publicKey.rawRepresentation
    }

    /// Apple's key ids and team ids: 10 characters, upper-case letters and digits.
    public static func isIdentifier(_ s: String) -> Bool {
        s.utf8.count == 10 && s.utf8.allSatisfy { (48...57).contains($0) || (65...90).contains($0) }
    }

    /// Whether the key may push to `bundleID` (the topic without its push-type suffix).
    public func allows(bundleID: String) -> Bool { topics.isEmpty || topics.contains(bundleID) }

    /// The record kept in the data directory.
    public var json: JSONValue {
        .object(["key_id": .string(keyID), "team_id": .string(teamID),
                 "topics": .array(topics.map { .string($0) }), "environment": .string(environment.rawValue),
                 "public_key": .string(publicKey.pemRepresentation)])
    }

    public init?(json: JSONValue) {
        guard let keyID = json["key_id"]?.stringValue, Self.isIdentifier(keyID),
              let teamID = json["team_id"]?.stringValue, Self.isIdentifier(teamID),
              let environment = json["environment"]?.stringValue.flatMap(KeyEnvironment.init(rawValue:)),
              let pem = json["public_key"]?.stringValue,
              let publicKey = try? P256.Signing.PublicKey(pemRepresentation: pem) else { return nil }
        let topics = json["topics"]?.arrayValue?.compactMap(\.stringValue) ?? []
        self.init(keyID: keyID, teamID: teamID, topics: topics, environment: environment, publicKey: publicKey)
    }
}
