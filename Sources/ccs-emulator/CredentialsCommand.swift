import ArgumentParser
import Foundation
import GoogleAuth
import CCSEngine
import CCSProtocol
import PushDomain

struct Credentials: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a service-account JSON file for HTTP v1, with a fresh RSA key the emulator knows.",
        discussion: """
            Generates an RSA-2048 key, stores its public part in DATA_DIR/credentials/KEY_ID.json (a running \
            emulator on that data dir finds it there; --auth strict accepts only assertions signed with such \
            keys) and writes the service-account file in Google's format: type, project_id, private_key_id, \
            private_key (PKCS#8 PEM), client_email, …, token_uri = --emulator/token. Admin SDKs take it as \
            GOOGLE_APPLICATION_CREDENTIALS. With --out the file is written with mode 0600 and one JSON line \
            describing it goes to stdout; without, the file itself goes to stdout.

            A running emulator hands out the same from POST /emulator/v1/credentials {"project_id":"P"}.

            Example: ccs-emulator credentials --project demo-project --out service-account.json
            """)

    @Option(help: "The project id: a project number (the sender ID) or a name mapped to one in --config.")
    var project: String
    @Option(help: "The emulator's data dir (its credentials/ folder gets the public key).")
    var dataDir = ".ccs-emulator"
    @Option(help: "Write the file here (mode 0600) instead of to stdout.")
    var out: String?
    @Option(help: "The emulator's HTTP base URL: token_uri is this URL followed by /token.")
    var emulator = "http://127.0.0.1:8080"
    @Flag(help: "Keep Google's token_uri (https://oauth2.googleapis.com/token), for clients that reach the emulator through its proxy.")
    var googleTokenURI = false

    func validate() throws {
        guard ProjectID.isValid(project) else { throw ValidationError("--project: \(ProjectID.rule)") }
        guard googleTokenURI || emulator.hasPrefix("http://") || emulator.hasPrefix("https://") else {
            throw ValidationError("--emulator must be an http:// or https:// URL, e.g. http://127.0.0.1:8080")
        }
    }

    func run() throws {
        let directory = URL(fileURLWithPath: dataDir, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
            .standardizedFileURL.path + "/credentials"
        let base = emulator.hasSuffix("/") ? String(emulator.dropLast()) : emulator
        let tokenURI = googleTokenURI ? "https://oauth2.googleapis.com/token" : base + "/token"
        let file: JSONValue
        do {
            let store = try ServiceAccountKeyStore(directory: directory)
            file = try store.issue(projectID: project, tokenURI: tokenURI,
                                   nowMillis: WallClock().nowMillis())
        } catch {
            throw ValidationError(error.description)
        }
        let text = ServiceAccountKeyStore.serviceAccountText(file)
        guard let out else {
            FileHandle.standardOutput.write(Data(text.utf8))
            return
        }
        let path = URL(fileURLWithPath: out, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
            .standardizedFileURL.path
        try? FileManager.default.removeItem(atPath: path)
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw ValidationError("cannot write --out \(path)")
        }
        var line = JSONObjectWriter()
        line.add("event", "credentials")
        line.add("file", path)
        line.add("project_id", project)
        line.add("client_email", file["client_email"]?.stringValue ?? "")
        line.add("private_key_id", file["private_key_id"]?.stringValue ?? "")
        line.add("token_uri", tokenURI)
        FileHandle.standardOutput.write(Data((line.finished() + "\n").utf8))
    }
}
