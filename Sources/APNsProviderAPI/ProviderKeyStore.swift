import Foundation
import Locking
import PushDomain

/// The signing keys the emulator knows, one JSON record per key in DATA_DIR/apns-keys/KEY_ID.json.
/// A key id not yet seen is looked up on disk, so a key that `ccs-emulator apns-key` made while the
/// server runs is known at the provider's first request.
public final class ProviderKeyStore: Sendable {
    public let directory: String
    private let keys = Locked<[String: ProviderKey]>([:])

    public init(directory: String) {
        self.directory = directory
    }

    public func key(id: String) -> ProviderKey? {
        if let known = keys.withLock({ $0[id] }) { return known }
        // Only an id of Apple's form names a file: nothing from a JWT header becomes a path otherwise.
        guard ProviderKey.isIdentifier(id),
              let text = try? String(contentsOfFile: path(of: id), encoding: .utf8),
              let json = try? JSONValue.parse(text), let key = ProviderKey(json: json), key.keyID == id else { return nil }
        keys.withLock { $0[id] = key }
        return key
    }

    /// Keeps the key (its public half) and writes its record.
    public func register(_ key: ProviderKey) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        try Data((key.json.encoded() + "\n").utf8).write(to: URL(fileURLWithPath: path(of: key.keyID)), options: .atomic)
        keys.withLock { $0[key.keyID] = key }
    }

    private func path(of id: String) -> String { directory + "/" + id + ".json" }
}
