import ArgumentParser
import CCSProtocol
import PushDomain
import DeviceSimulator
import Foundation
import GoogleAuth
import NIOCore
import NIOPosix

extension Priority: ExpressibleByArgument {}

/// Which FCM API `send` speaks.
enum SendAPI: String, ExpressibleByArgument, CaseIterable {
    case ccs, legacy, v1
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send one downstream message over CCS, the legacy HTTP API or HTTP v1, as an app server would, and print the answer.",
        discussion: """
            Connects to the CCS port over TLS, logs in with SASL PLAIN as SENDER@gcm.googleapis.com, binds, \
            sends {"to":TOKEN,"message_id":…,…} and prints the ACK or NACK as one JSON line on stdout (the \
            JSON inside <gcm>). With --wait-receipt the message asks for a delivery receipt; the receipt is \
            printed as a second line and ACKed. Then the stream is closed with </stream:stream>.

            Exit status: 0 for an ACK (and the receipt, when asked for); 1 for a NACK or a stanza error; 2 \
            when no answer came (cannot connect, TLS or login failed, --timeout ran out), with \
            {"error":"…"} on stdout. Upstream messages and other receipts for the sender that arrive \
            meanwhile are left unACKed, so the emulator hands them to the next connection of that sender.

            With --api legacy the same message goes to POST /fcm/send on --emulator (Authorization: \
            key=--key) and the JSON answer is printed; with --api v1 to POST /v1/projects/P/messages:send \
            with an access token obtained from --credentials (a service-account file from `ccs-emulator \
            credentials`; P is its project). Exit status 0 when the message was accepted, 1 when the API \
            refused it (a legacy result with an error, a v1 error), 2 when no answer came.

            Example: ccs-emulator send --to TOKEN --data hello=world --notification title=Hi,body=there
            """)

    @Option(help: "ccs (XMPP on --server), legacy (POST /fcm/send on --emulator) or v1 (messages:send on --emulator with --credentials).")
    var api: SendAPI = .ccs
    @Option(help: "The emulator's HTTP base URL, for --api legacy and v1.")
    var emulator = "http://127.0.0.1:8080"
    @Option(help: "Service-account file for --api v1 (from `ccs-emulator credentials`).")
    var credentials: String?

    @Option(help: "The registration token to send to.")
    var to: String
    @Option(help: ArgumentHelp("A data field, KEY=VALUE (repeat for several).", valueName: "key=value"))
    var data: [String] = []
    @Option(help: ArgumentHelp("Notification fields, KEY=VALUE[,KEY=VALUE…] (repeatable), e.g. title=Hi,body=there.",
                               valueName: "key=value,…"))
    var notification: [String] = []
    @Option(help: "high or normal (CCS's default: normal for data messages, high for notifications).")
    var priority: Priority?
    @Option(help: "time_to_live in seconds, 0…2419200 (CCS's default: 2419200, four weeks).")
    var ttl: Int?
    @Option(help: "collapse_key.")
    var collapseKey: String?
    @Option(help: "message_id (default: a random send-… id).")
    var messageID: String?
    @Option(help: "The sender ID to log in as.")
    var sender = "123456789"
    @Option(help: "The server key (permissive auth accepts any non-empty key).")
    var key = "any-key"
    @Flag(help: "Ask for a delivery receipt (delivery_receipt_requested), wait for it, print it and ACK it.")
    var waitReceipt = false
    @Option(help: "The emulator's CCS port, HOST:PORT.")
    var server = "127.0.0.1:5235"
    @Option(help: "The CA certificate to trust: the running emulator's DATA_DIR/tls/ca.pem.")
    var ca = ".ccs-emulator/tls/ca.pem"
    @Option(help: "Seconds to wait for each step: the session, the ACK or NACK, the receipt.")
    var timeout: Double = 10

    func validate() throws {
        if to.isEmpty { throw ValidationError("--to is empty") }
        if sender.isEmpty || !sender.allSatisfy({ $0.isASCII && $0.isNumber }) {
            throw ValidationError("--sender must be a numeric sender ID")
        }
        if key.isEmpty { throw ValidationError("--key must not be empty") }
        if let ttl, !(0...DownstreamMessage.maximumTimeToLive).contains(ttl) {
            throw ValidationError("--ttl must be 0…\(DownstreamMessage.maximumTimeToLive)")
        }
        // Bounded: it becomes nanoseconds, and an Int64 overflow (or a NaN) would trap.
        if !(timeout.isFinite && timeout > 0 && timeout <= 86_400) {
            throw ValidationError("--timeout must be a number of seconds from more than 0 to 86400")
        }
        _ = try endpoint()
        switch api {
        case .ccs:
            if credentials != nil { throw ValidationError("--credentials goes with --api v1") }
        case .legacy, .v1:
            if waitReceipt { throw ValidationError("--wait-receipt is CCS only: delivery receipts are an XMPP feature") }
            if messageID != nil { throw ValidationError("--message-id is CCS only: the HTTP APIs choose the id") }
            if HTTPJSONClient.parseBaseURL(emulator) == nil {
                throw ValidationError("--emulator must look like http://HOST:PORT (the emulator's --http-port)")
            }
            if api == .v1 && credentials == nil {
                throw ValidationError("--api v1 needs --credentials FILE (make one with `ccs-emulator credentials --project P --out FILE`)")
            }
            if api == .legacy && credentials != nil { throw ValidationError("--credentials goes with --api v1") }
        }
        _ = try dataFields()
        _ = try notificationFields()
    }

    func endpoint() throws -> (host: String, port: Int) {
        guard let colon = server.lastIndex(of: ":"), let port = Int(server[server.index(after: colon)...]),
              (1...65535).contains(port) else {
            throw ValidationError("--server must be HOST:PORT (the emulator's --ccs-port)")
        }
        var host = String(server[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.isEmpty { throw ValidationError("--server must be HOST:PORT (the emulator's --ccs-port)") }
        return (host, port)
    }

    func dataFields() throws -> [String: String]? {
        guard !data.isEmpty else { return nil }
        var fields: [String: String] = [:]
        for pair in data {
            guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
                throw ValidationError("--data \(pair): expected KEY=VALUE")
            }
            fields[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
        }
        return fields
    }

    /// `title=Hi, there,body=x` is title "Hi, there" and body "x": a comma starts a new field only
    /// when a `KEY=` follows it.
    func notificationFields() throws -> JSONValue? {
        guard !notification.isEmpty else { return nil }
        var fields: [String: JSONValue] = [:]
        for option in notification {
            var pairs: [String] = []
            for piece in option.split(separator: ",", omittingEmptySubsequences: false) {
                if piece.contains("=") || pairs.isEmpty {
                    pairs.append(String(piece))
                } else {
                    pairs[pairs.count - 1] += "," + piece
                }
            }
            for pair in pairs {
                guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
                    throw ValidationError("--notification \(option): expected KEY=VALUE[,KEY=VALUE…]")
                }
                fields[String(pair[..<eq])] = .string(String(pair[pair.index(after: eq)...]))
            }
        }
        return .object(fields)
    }

    func run() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let status: Int32
        do {
            switch api {
            case .ccs: status = try await exchange(group: group)
            case .legacy: status = try await sendLegacy(group: group)
            case .v1: status = try await sendV1(group: group)
            }
        } catch let failure as SendFailure {
            Output.line(JSONValue.object(["error": .string(failure.text)]).encoded())
            status = 2
        }
        try? await group.shutdownGracefully()
        if status != 0 { throw ExitCode(status) }
    }

    /// Sends the message and prints the answers; the exit status, or a `SendFailure` when no answer came.
    private func exchange(group: any EventLoopGroup) async throws -> Int32 {
        let (host, port) = try endpoint()
        let messageID = self.messageID ?? "send-" + String(UInt64.random(in: 0 ... .max), radix: 16)
        let message = DownstreamMessage(to: to, messageID: messageID, collapseKey: collapseKey, priority: priority,
                                        timeToLive: ttl, deliveryReceiptRequested: waitReceipt,
                                        data: try dataFields(), notification: try notificationFields())
        let caPEM: String
        do { caPEM = try String(contentsOfFile: ca, encoding: .utf8) } catch {
            throw SendFailure("cannot read the CA certificate \(ca): \(error.localizedDescription) (pass --ca "
                              + "DATA_DIR/tls/ca.pem of the running emulator; scripts/serve's is <repo>/.ccs-emulator/tls/ca.pem)")
        }
        let step = TimeAmount.nanoseconds(Int64(timeout * 1e9))
        let isAddress = (try? SocketAddress(ipAddress: host, port: 0)) != nil

        let client: AppServerClient
        do {
            client = try await AppServerClient.connect(host: host, port: port, caPEM: caPEM,
                                                       serverHostname: isAddress ? nil : host,
                                                       senderID: sender, serverKey: key, group: group, timeout: step)
        } catch let failure as AppServerClient.Failure {
            throw SendFailure(failure.description + hint(for: failure))
        } catch {
            throw SendFailure(ConnectionFailure.describe(error))
        }

        var exchange = Exchange(messageID: messageID, waitReceipt: waitReceipt)
        var deadline = ContinuousClock.now + .nanoseconds(step.nanoseconds)
        var timer = client.startTimer(step)
        client.send(gcm: message.encodedJSON())
        for await event in client.events {
            switch event {
            case .gcm(let text, let json):
                switch exchange.take(text: text, json: json) {
                case .answer(let acked):
                    Output.line(text)
                    if !acked {
                        timer.cancel()
                        await client.close()
                        return 1
                    }
                    if let receipt = exchange.receipt {
                        Output.line(receipt) // it overtook the ACK
                    } else if waitReceipt {
                        // A new wait: the receipt comes when the device has the message.
                        timer.cancel()
                        deadline = ContinuousClock.now + .nanoseconds(step.nanoseconds)
                        timer = client.startTimer(step)
                    }
                case .receipt(let receiptID, let from):
                    // As an app server must: ACK the receipt, or CCS sends it again.
                    client.send(gcm: AppServerJSON.ack(messageID: receiptID, to: from))
                    if exchange.answered { Output.line(text) }
                case .notOurs:
                    break
                }
                if exchange.done {
                    timer.cancel()
                    await client.close()
                    return 0
                }
            case .stanzaError(let condition, let text):
                timer.cancel()
                await client.close()
                let description = "stanza error \(condition)" + (text.isEmpty ? "" : ": \(text)")
                Output.line(JSONValue.object(["error": .string(description)]).encoded())
                return 1
            case .timedOut:
                guard ContinuousClock.now >= deadline else { continue } // a cancelled timer that fired anyway
                await client.close(grace: .milliseconds(500))
                if !exchange.answered {
                    throw SendFailure("no ACK or NACK for \(messageID) within \(seconds) s")
                }
                throw SendFailure("no delivery receipt for \(messageID) within \(seconds) s: the device has not "
                                  + "received the message yet (is it online? a receipt may also go to another "
                                  + "connection of sender \(sender))")
            case .closed(let reason):
                timer.cancel()
                throw SendFailure("the connection closed before "
                                  + (exchange.answered ? "the delivery receipt" : "the ACK or NACK") + " arrived"
                                  + (reason.map { ": \($0)" } ?? ""))
            }
        }
        throw SendFailure("the connection closed")
    }

    /// `--timeout` as people write it: "10", "2.5".
    private var seconds: String {
        timeout == timeout.rounded() ? String(Int(timeout)) : String(timeout)
    }

    /// What to try, for the failures a newcomer meets first.
    private func hint(for failure: AppServerClient.Failure) -> String {
        guard let underlying = failure.underlying else { return "" }
        if ConnectionFailure.isTLSHandshake(underlying) {
            return "; is --server \(server) the emulator's CCS port, and --ca \(ca) that emulator's CA?"
        }
        if failure.description.contains("connection refused") {
            return "; is the emulator running? --server is its CCS port, the ready line's ccs_port"
        }
        return ""
    }

}

extension Send {
    private func httpClient(group: any EventLoopGroup) -> HTTPJSONClient {
        let (host, port) = HTTPJSONClient.parseBaseURL(emulator)!  // checked in validate()
        var client = HTTPJSONClient(host: host, port: port, group: group)
        client.timeout = .nanoseconds(Int64(timeout * 1e9))
        return client
    }

    private func post(_ client: HTTPJSONClient, _ path: String, body: String, contentType: String,
                      headers: [(String, String)]) async throws -> (status: Int, body: String) {
        do {
            return try await client.request(.POST, path, body: body, contentType: contentType, headers: headers)
        } catch {
            throw SendFailure("no answer from \(emulator)\(path): \(ConnectionFailure.describe(error)) (is --emulator the emulator's HTTP port?)")
        }
    }

    /// The legacy JSON: `{"to":…,"data":…,"notification":…,"priority":…,"time_to_live":…,"collapse_key":…}`.
    func legacyBody() throws -> String {
        var fields: [String: JSONValue] = ["to": .string(to)]
        if let data = try dataFields() { fields["data"] = .object(data.mapValues { .string($0) }) }
        if let notification = try notificationFields() { fields["notification"] = notification }
        if let priority { fields["priority"] = .string(priority.rawValue) }
        if let ttl { fields["time_to_live"] = .int(Int64(ttl)) }
        if let collapseKey { fields["collapse_key"] = .string(collapseKey) }
        return JSONValue.object(fields).encoded()
    }

    /// The v1 message: `notification` takes title, body and image; the other notification fields
    /// are Android's (`android.notification`), as in FCM's v1 schema.
    func v1Body() throws -> String {
        var message: [String: JSONValue] = ["token": .string(to)]
        if let data = try dataFields() { message["data"] = .object(data.mapValues { .string($0) }) }
        var android: [String: JSONValue] = [:]
        if case .object(let fields)? = try notificationFields() {
            let common = fields.filter { ["title", "body", "image"].contains($0.key) }
            let platform = fields.filter { !["title", "body", "image"].contains($0.key) }
            if !common.isEmpty { message["notification"] = .object(common) }
            if !platform.isEmpty { android["notification"] = .object(platform) }
        }
        if let priority { android["priority"] = .string(priority.rawValue.uppercased()) }
        if let ttl { android["ttl"] = .string("\(ttl)s") }
        if let collapseKey { android["collapse_key"] = .string(collapseKey) }
        if !android.isEmpty { message["android"] = .object(android) }
        return JSONValue.object(["message": .object(message)]).encoded()
    }

    func sendLegacy(group: any EventLoopGroup) async throws -> Int32 {
        let client = httpClient(group: group)
        let answer = try await post(client, "/fcm/send", body: try legacyBody(), contentType: "application/json",
                                    headers: [("Authorization", "key=\(key)")])
        return printed(answer) { json in (json["failure"]?.intValue ?? 1) == 0 }
    }

    func sendV1(group: any EventLoopGroup) async throws -> Int32 {
        let path = credentials!  // checked in validate()
        let account: ServiceAccountAssertion.Account
        do {
            let text = try String(contentsOfFile: path, encoding: .utf8)
            account = try ServiceAccountAssertion.Account(file: try JSONValue.parse(text))
        } catch {
            throw SendFailure("cannot use --credentials \(path): \(error)")
        }
        let client = httpClient(group: group)
        let assertion: String
        do {
            assertion = try await ServiceAccountAssertion.sign(account, nowSeconds: Int(Date().timeIntervalSince1970))
        } catch {
            throw SendFailure("--credentials \(path): \(error)")
        }
        // The emulator's /token, whatever token_uri the file names (proxy-mode files keep Google's).
        let token = try await post(client, "/token", body: ServiceAccountAssertion.form(assertion),
                                   contentType: "application/x-www-form-urlencoded", headers: [])
        guard token.status == 200, let access = (try? JSONValue.parse(token.body))?["access_token"]?.stringValue else {
            Output.line(token.body.trimmingCharacters(in: .whitespacesAndNewlines))
            return 1
        }
        let answer = try await post(client, "/v1/projects/\(account.projectID)/messages:send", body: try v1Body(),
                                    contentType: "application/json", headers: [("Authorization", "Bearer \(access)")])
        return printed(answer) { _ in answer.status == 200 }
    }

    /// Prints the answer as one line; 0 if `accepted`, else 1.
    private func printed(_ answer: (status: Int, body: String), accepted: (JSONValue) -> Bool) -> Int32 {
        let text = answer.body.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let json = try? JSONValue.parse(text) else {
            Output.line(JSONValue.object(["status": .int(Int64(answer.status)), "body": .string(text)]).encoded())
            return 1
        }
        Output.line(json.encoded())
        return answer.status == 200 && accepted(json) ? 0 : 1
    }
}

/// No answer from the emulator: printed as `{"error":…}`, exit status 2.
struct SendFailure: Error {
    var text: String
    init(_ text: String) { self.text = text }
}

/// The state of one send: the ACK/NACK for our message id, then (when asked for) its receipt. A
/// receipt can overtake the ACK on the wire; it is then ACKed at once and printed after the ACK.
struct Exchange {
    enum Step {
        case answer(acked: Bool)
        case receipt(id: String, from: String?)
        case notOurs
    }

    let messageID: String
    let waitReceipt: Bool
    private(set) var answered = false
    private(set) var acked = false
    private(set) var receipt: String?

    init(messageID: String, waitReceipt: Bool) {
        self.messageID = messageID
        self.waitReceipt = waitReceipt
    }

    var done: Bool { answered && (!acked || !waitReceipt || receipt != nil) }

    mutating func take(text: String, json: JSONValue) -> Step {
        let type = json["message_type"]?.stringValue
        let id = json["message_id"]?.stringValue
        switch type {
        case "ack"?, "nack"?:
            guard id == messageID, !answered else { return .notOurs }
            answered = true
            acked = type == "ack"
            return .answer(acked: acked)
        case "receipt"? where waitReceipt && receipt == nil
            && (json["data"]?["original_message_id"]?.stringValue == messageID
                || id == DeliveryReceipt.messageIDPrefix + messageID):
            receipt = text
            return .receipt(id: id ?? "", from: json["from"]?.stringValue)
        default:
            return .notOurs
        }
    }
}
