import APNsProviderAPI
import Hummingbird
import NIOCore
import PushDomain

/// `POST /emulator/v1/apns/keys`: what `ccs-emulator apns-key` does, through the admin API (behind its
/// token and request guard): `{"team_id", "key_id", "topics"?, "environment"?}` in, 201 with the key's
/// record and `p8`, the private key's PEM, out (docs/admin-api.md).
enum APNsKeyRoutes {
    static func add(to router: Router<some RequestContext>, dataDirectory: String) {
        router.post("emulator/v1/apns/keys") { request, _ in
            let body = try await request.collectBody(limit: 64 << 10)
            guard let value = try? JSONValue.parse(String(buffer: body)), case .object(let fields) = value else {
                return error("the body must be a JSON object")
            }
            guard let teamID = fields["team_id"]?.stringValue, let keyID = fields["key_id"]?.stringValue else {
                return error("team_id and key_id are required (10 upper-case letters or digits each)")
            }
            var topics: [String] = []
            if let list = fields["topics"] {
                guard let items = list.arrayValue, items.count <= 100,
                      let strings = Optional(items.compactMap(\.stringValue)), strings.count == items.count,
                      strings.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 255 }) else {
                    return error("topics must be a list of bundle ids")
                }
                topics = strings
            }
            var environment = KeyEnvironment.both
            if let e = fields["environment"] {
                guard let known = e.stringValue.flatMap(KeyEnvironment.init(rawValue:)) else {
                    return error("environment must be sandbox, production or both")
                }
                environment = known
            }
            do {
                let issued = try ProviderKeyIssuer.issue(teamID: teamID, keyID: keyID, topics: topics,
                                                         environment: environment, dataDirectory: dataDirectory)
                guard case .object(var record) = issued.key.json else { return error("unreadable key") }
                record["p8"] = .string(issued.p8PEM)
                return json(.created, .object(record))
            } catch let e as ConfigurationError {
                return error(e.description)
            }
        }
    }

    private static func error(_ message: String) -> Response {
        json(.badRequest, .object(["error": .object([
            "code": .int(400), "message": .string(message), "status": .string("INVALID_ARGUMENT"),
        ])]))
    }

    private static func json(_ status: HTTPResponse.Status, _ value: JSONValue) -> Response {
        Response(status: status, headers: [.contentType: "application/json"],
                 body: .init(byteBuffer: ByteBuffer(string: value.encoded() + "\n")))
    }
}
