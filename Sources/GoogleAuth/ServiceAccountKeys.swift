import CryptoExtras
import Foundation
import Locking
import PushDomain

/// One service-account key the emulator issued: what it needs to check assertions signed with it.
/// The private key is never kept: it is handed out once, in the service-account file.
public struct IssuedKey: Sendable, Equatable {
    /// `private_key_id` in the service-account file, `kid` in the assertions it signs.
    public var keyID: String
    public var projectID: String
    public var clientEmail: String
    /// SubjectPublicKeyInfo PEM (`BEGIN PUBLIC KEY`).
    public var publicKeyPEM: String
    /// Wall-clock milliseconds.
    public var createdAtMillis: Int64

    public init(keyID: String, projectID: String, clientEmail: String, publicKeyPEM: String, createdAtMillis: Int64) {
        self.keyID = keyID
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.publicKeyPEM = publicKeyPEM
        self.createdAtMillis = createdAtMillis
    }

    var storedJSON: JSONValue {
        .object([
            "key_id": .string(keyID), "project_id": .string(projectID), "client_email": .string(clientEmail),
            "public_key": .string(publicKeyPEM), "created_at": .int(createdAtMillis),
        ])
    }

    init?(storedJSON json: JSONValue) {
        guard let keyID = json["key_id"]?.stringValue, let projectID = json["project_id"]?.stringValue,
              let clientEmail = json["client_email"]?.stringValue, let pem = json["public_key"]?.stringValue
        else { return nil }
        self.init(keyID: keyID, projectID: projectID, clientEmail: clientEmail, publicKeyPEM: pem,
                  createdAtMillis: json["created_at"]?.intValue ?? 0)
    }
}

public struct CredentialsError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A Google Cloud project id as the emulator accepts it: a project number (a sender ID, 1 to 32
/// digits) or a project name of 1 to 63 lower-case letters, digits and hyphens. Names go into
/// e-mail addresses and URL paths, so nothing else is let in.
public enum ProjectID {
    public static func isValid(_ s: String) -> Bool {
        guard !s.isEmpty, s.utf8.count <= 63 else { return false }
        return s.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }
    }

    /// A project number: what a sender ID is.
    public static func isNumber(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 32 && s.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    public static let rule = "a project id is 1 to 63 lower-case letters, digits and hyphens (a project number is all digits, at most 32)"
}

/// The service-account keys the emulator issued, one file each in `DATA_DIR/credentials/KEY_ID.json`
/// (public key and project only), so that they survive restarts and keys made by
/// `ccs-emulator credentials` while a server runs are found by that server (a key id it does not
/// know yet is looked up on disk).
public final class ServiceAccountKeyStore: Sendable {
    public let directory: String
    private let keys: Locked<[String: IssuedKey]>

    /// Creates the directory (mode 0700) when missing and reads every key in it.
    public init(directory: String) throws(CredentialsError) {
        self.directory = directory
        let fm = FileManager.default
        do {
            try fm.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                   attributes: [.posixPermissions: 0o700])
        } catch {
            throw CredentialsError("cannot create \(directory): \(error.localizedDescription)")
        }
        var loaded: [String: IssuedKey] = [:]
        let names = (try? fm.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasSuffix(".json") {
            if let key = Self.read(path: directory + "/" + name) { loaded[key.keyID] = key }
        }
        keys = Locked(loaded)
    }

    /// The key with this id, from memory or else from its file.
    public func key(id: String) -> IssuedKey? {
        if let key = keys.withLock({ $0[id] }) { return key }
        // Key ids are 40 hex digits: anything else is not a file name of ours.
        guard Self.isKeyID(id), let key = Self.read(path: directory + "/" + id + ".json"), key.keyID == id else { return nil }
        keys.withLock { $0[id] = key }
        return key
    }

    public var count: Int { keys.withLock { $0.count } }

    /// Every key, those in memory and those written to the directory since (by `ccs-emulator
    /// credentials`), newest first.
    public func all() -> [IssuedKey] {
        var found = keys.withLock { $0 }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasSuffix(".json") && found[String(name.dropLast(5))] == nil {
            if let key = Self.read(path: directory + "/" + name) { found[key.keyID] = key }
        }
        return found.values.sorted { ($0.createdAtMillis, $0.keyID) > ($1.createdAtMillis, $1.keyID) }
    }

    /// A new RSA-2048 key for `projectID`, stored (public part only), and the service-account file
    /// (Google's format, `private_key` PKCS#8 PEM) whose `token_uri` is `tokenURI`.
    public func issue(projectID: String, tokenURI: String, nowMillis: Int64) throws(CredentialsError) -> JSONValue {
        guard ProjectID.isValid(projectID) else { throw CredentialsError("invalid project id \"\(projectID.prefix(80))\": \(ProjectID.rule)") }
        let privateKey: _RSA.Signing.PrivateKey
        do { privateKey = try _RSA.Signing.PrivateKey(keySize: .bits2048) } catch {
            throw CredentialsError("could not generate an RSA key: \(error)")
        }
        let keyID = RandomText.hex(40)
        // Firebase's own service accounts are named firebase-adminsdk-XXXXX@PROJECT.iam.gserviceaccount.com.
        let clientEmail = "firebase-adminsdk-\(RandomText.of("abcdefghijklmnopqrstuvwxyz0123456789", count: 5))@\(projectID).iam.gserviceaccount.com"
        let clientID = String(Int.random(in: 1...9)) + String((0..<20).map { _ in Character(String(Int.random(in: 0...9))) })
        let key = IssuedKey(keyID: keyID, projectID: projectID, clientEmail: clientEmail,
                            publicKeyPEM: privateKey.publicKey.pemRepresentation, createdAtMillis: nowMillis)
        try write(key)
        keys.withLock { $0[keyID] = key }
        let encodedEmail = clientEmail.replacingOccurrences(of: "@", with: "%40")
        return .object([
            "type": "service_account",
            "project_id": .string(projectID),
            "private_key_id": .string(keyID),
            "private_key": .string(privateKey.pkcs8PEMRepresentation + "\n"),
            "client_email": .string(clientEmail),
            "client_id": .string(clientID),
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": .string(tokenURI),
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": .string("https://www.googleapis.com/robot/v1/metadata/x509/\(encodedEmail)"),
            "universe_domain": "googleapis.com",
        ])
    }

    /// The service-account file's text as Google writes it: one field a line, in its order.
    public static func serviceAccountText(_ file: JSONValue) -> String {
        let order = ["type", "project_id", "private_key_id", "private_key", "client_email", "client_id", "auth_uri",
                     "token_uri", "auth_provider_x509_cert_url", "client_x509_cert_url", "universe_domain"]
        let lines = order.compactMap { name in file[name].map { "  \(JSONValue.string(name).encoded()): \($0.encoded())" } }
        return "{\n" + lines.joined(separator: ",\n") + "\n}\n"
    }

    private func write(_ key: IssuedKey) throws(CredentialsError) {
        let path = directory + "/" + key.keyID + ".json"
        let temporary = path + ".tmp"
        unlink(temporary)  // left by a process that died between create and rename; O_EXCL would refuse it
        try PrivateFile.create(atPath: temporary, contents: Data((key.storedJSON.encoded() + "\n").utf8))
        // rename(2) replaces atomically: a reader never sees half a key file.
        guard rename(temporary, path) == 0 else {
            throw CredentialsError("cannot rename \(temporary) to \(path): errno \(errno)")
        }
    }

    private static func read(path: String) -> IssuedKey? {
        guard let data = FileManager.default.contents(atPath: path), data.count <= 64 * 1024,
              let json = try? JSONValue.parse(String(decoding: data, as: UTF8.self)) else { return nil }
        return IssuedKey(storedJSON: json)
    }

    static func isKeyID(_ s: String) -> Bool {
        s.utf8.count == 40 && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

}
