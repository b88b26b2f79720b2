import APNsProviderAPI
import ArgumentParser
import CCSEmulator
import CCSProtocol
import PushDomain
import Foundation

/// `ccs-emulator apns-key`: a token-signing key (`.p8`) for the APNs HTTP/2 provider API.
struct APNsKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-key",
        abstract: "Make an APNs token-signing key (.p8) the emulator knows, for provider-token (JWT) auth.",
        discussion: """
            Writes the private key to --out as Apple's developer portal hands it out (PKCS#8 PEM, mode 0600) \
            and keeps its public half in DATA_DIR/apns-keys/KEY_ID.json, where `serve` with the same --data-dir \
            finds it (also while it runs). Prints one JSON line. A provider signs ES256 tokens with it \
            (kid = --key-id, iss = --team-id). See docs/apns.md.
            """)

    @Option(help: "The team id (10 upper-case letters or digits), the tokens' iss.")
    var teamId: String
    @Option(help: "The key id (10 upper-case letters or digits), the tokens' kid.")
    var keyId: String
    @Option(help: "Where to write the .p8 file.")
    var out: String
    @Option(help: "Limit the key to these bundle ids (comma-separated); default: every topic of the team.")
    var topics: String?
    @Option(help: "The environment the key may push to: sandbox, production or both.")
    var environment: KeyEnvironment = .both
    @Option(help: "The data directory of the server that is to know the key (as serve's --data-dir).")
    var dataDir = ".ccs-emulator"

    func validate() throws {
        guard ProviderKey.isIdentifier(teamId), ProviderKey.isIdentifier(keyId) else {
            throw ValidationError("--team-id and --key-id must be 10 upper-case letters or digits, as Apple issues them")
        }
    }

    func run() throws {
        let topicList = (topics ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        do {
            let issued = try ProviderKeyIssuer.issue(teamID: teamId, keyID: keyId, topics: topicList,
                                                     environment: environment, dataDirectory: dataDir)
            try ProviderKeyIssuer.write(issued, to: out)
            Output.line(JSONValue.object([
                "key_id": .string(keyId), "team_id": .string(teamId), "p8": .string(out),
                "topics": .array(topicList.map { .string($0) }), "environment": .string(environment.rawValue),
            ]).encoded())
        } catch {
            FileHandle.standardError.write(Data("apns-key: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}

extension KeyEnvironment: ExpressibleByArgument {}
