import ArgumentParser
import CCSEmulator
import CCSProtocol
import PushDomain
import Foundation

/// `ccs-emulator apns-cert`: a provider certificate for the APNs gateway and feedback service.
struct APNsCert: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-cert",
        abstract: "Issue an APNs provider certificate (client certificate) for a bundle id from the development CA.",
        discussion: """
            Writes DIR/cert.pem, DIR/key.pem and DIR/combined.pem (certificate and key in one file, as pushjack \
            and PyAPNs take it) and prints one JSON line with the paths. The subject is named as Apple named \
            it: UID=<bundle id>, CN=Apple Push Services: <bundle id> (with --sandbox: Apple Development IOS Push \
            Services: <bundle id>). The gateway reads the push topic from the UID. The CA is DATA_DIR/tls/ca.pem \
            (created if missing), the one `serve` uses with the same --data-dir. See docs/apns.md.
            """)

    @Option(help: "The app's bundle id (the push topic).")
    var bundleId: String
    @Flag(help: "Name it as a development (sandbox) certificate. The emulator serves both on the same ports.")
    var sandbox = false
    @Option(help: "The data directory whose development CA issues it (as serve's --data-dir).")
    var dataDir = ".ccs-emulator"
    @Option(help: "Where to write the files (default: DATA_DIR/apns/BUNDLE_ID).")
    var out: String?

    func validate() throws {
        let trimmed = bundleId.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.utf8.count <= 255, trimmed == bundleId,
              !bundleId.contains("/") else {
            throw ValidationError("--bundle-id must be a bundle id such as com.example.app (1–255 bytes, no spaces or /)")
        }
    }

    func run() throws {
        let directory = out ?? (dataDir + "/apns/" + bundleId + (sandbox ? "-sandbox" : ""))
        let files: ProviderCertificateFiles
        do {
            files = try DevelopmentCA.issueProviderCertificate(bundleID: bundleId, sandbox: sandbox,
                                                               dataDirectory: dataDir, outputDirectory: directory)
        } catch {
            FileHandle.standardError.write(Data("apns-cert: \(error)\n".utf8))
            throw ExitCode(1)
        }
        Output.line(JSONValue.object([
            "bundle_id": .string(bundleId), "subject": .string(files.subject), "cert": .string(files.certificatePath),
            "key": .string(files.keyPath), "combined": .string(files.combinedPath),
            "ca_cert": .string(dataDir + "/tls/ca.pem"),
        ]).encoded())
    }
}
