import CCSProtocol
import PushDomain
import GoogleAuth
import HTTPRequestBody
import Hummingbird
import MultipartKit
import NIOCore

/// `POST /batch`: Google's batch convention, as googleapiclient's `BatchHttpRequest` (what older
/// admin SDKs' `send_all` used) sends it. The body is `multipart/mixed`; each part is an
/// `application/http` request (`POST /v1/projects/P/messages:send HTTP/1.1`, headers, a blank line,
/// the JSON body) with a `Content-ID`. The answer is `multipart/mixed` with one `application/http`
/// response per part, in request order, each echoing `Content-ID: <response-ID>`.
///
/// Parts are sent one after another, so that the messages reach a device's queue in the order of
/// the batch (Google does not promise an order; in order is what a test expects).
extension FCMHTTPAPI {
    /// Google's batch limit for FCM (send_all refused more than 500 messages).
    static let maximumBatchParts = 500
    static let maximumBatchBytes = 16 << 20

    func batch(_ request: Request) async throws -> Response {
        guard let contentType = request.headers[.contentType],
              let boundary = Self.multipartBoundary(contentType) else {
            throw GoogleError.invalidArgument(
                "Invalid batch request: the Content-Type must be multipart/mixed with a boundary",
                field: "", description: "not multipart/mixed")
        }
        let body = try await request.collectBody(limit: Self.maximumBatchBytes)
        let parts: [BatchPart]
        do { parts = try Self.parseBatch(body, boundary: boundary) } catch {
            throw GoogleError.invalidArgument("Invalid batch request: \(error.description)", field: "",
                                              description: "malformed multipart/mixed body")
        }
        guard !parts.isEmpty else {
            throw GoogleError.invalidArgument("Invalid batch request: no parts", field: "", description: "empty batch")
        }
        guard parts.count <= Self.maximumBatchParts else {
            throw GoogleError.invalidArgument(
                "Invalid batch request: \(parts.count) parts; a batch holds at most \(Self.maximumBatchParts)",
                field: "", description: "too many parts")
        }
        let outerAuthorization = request.headers[.authorization]
        let responseBoundary = "batch_" + RandomText.hex(16)
        var out = ByteBuffer()
        for part in parts {
            let answer = await batchAnswer(part, outerAuthorization: outerAuthorization)
            out.writeString("--\(responseBoundary)\r\nContent-Type: application/http\r\n")
            if let id = part.contentID { out.writeString("Content-ID: \(Self.responseContentID(id))\r\n") }
            out.writeString("\r\n")
            out.writeString("HTTP/1.1 \(answer.status.code) \(answer.status.reasonPhrase)\r\n")
            for field in answer.headers { out.writeString("\(field.name.canonicalName): \(field.value)\r\n") }
            out.writeString("\r\n")
            var answerBody = answer.body
            out.writeBuffer(&answerBody)
            out.writeString("\r\n")
        }
        out.writeString("--\(responseBoundary)--\r\n")
        return Response(status: .ok, headers: [.contentType: "multipart/mixed; boundary=\(responseBoundary)"],
                        body: .init(byteBuffer: out))
    }

    struct BatchAnswer {
        var status: HTTPResponse.Status
        var headers: HTTPFields
        var body: ByteBuffer
    }

    /// One part, answered as its own request would be.
    func batchAnswer(_ part: BatchPart, outerAuthorization: String?) async -> BatchAnswer {
        do throws(GoogleError) {
            let inner: BatchRequest
            switch BatchRequest.parse(part.body) {
            case .success(let r): inner = r
            case .failure(let error): throw error
            }
            guard inner.method == "POST", let project = Self.messagesSendProject(inner.path) else {
                throw GoogleError.notFound(
                    "Requested entity was not found: a batch part may only be POST /v1/projects/PROJECT/messages:send (got \(inner.method) \(inner.path.prefix(120)))")
            }
            // The part's own Authorization, else the batch request's (Google accepts either).
            let grant = try bearerGrant(authorization: inner.headers["authorization"] ?? outerAuthorization)
            try v1Check(grant: grant, project: project)
            let answer = try await v1Send(project: project, body: inner.body)
            return BatchAnswer(status: .ok, headers: [.contentType: "application/json; charset=UTF-8"],
                               body: ByteBuffer(string: answer + "\n"))
        } catch {
            var headers = error.extraHeaders
            headers[.contentType] = "application/json; charset=UTF-8"
            if let retryAfter = error.retryAfter { headers[.retryAfter] = String(retryAfter) }
            return BatchAnswer(status: error.status, headers: headers, body: ByteBuffer(string: error.json + "\n"))
        }
    }

    /// `boundary` of a `multipart/mixed` Content-Type (quoted or not), or nil.
    static func multipartBoundary(_ contentType: String) -> String? {
        let pieces = contentType.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let first = pieces.first, first.lowercased() == "multipart/mixed" else { return nil }
        for piece in pieces.dropFirst() {
            guard let eq = piece.firstIndex(of: "="),
                  piece[..<eq].trimmingCharacters(in: .whitespaces).lowercased() == "boundary" else { continue }
            var value = piece[piece.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            // RFC 2046 §5.1.1: 1 to 70 characters.
            guard (1...70).contains(value.utf8.count), value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
            return value
        }
        return nil
    }

    /// `<ID>` → `<response-ID>`, as Google answers (clients match answers to requests by it).
    static func responseContentID(_ id: String) -> String {
        var inner = id.trimmingCharacters(in: .whitespaces)
        if inner.hasPrefix("<"), inner.hasSuffix(">"), inner.count >= 2 { inner = String(inner.dropFirst().dropLast()) }
        return "<response-\(inner)>"
    }

    /// The project of `/v1/projects/P/messages:send` (a full `https://host/…` URL is taken too).
    static func messagesSendProject(_ target: String) -> String? {
        var path = Substring(target)
        if let scheme = path.range(of: "://") {
            let afterScheme = path[scheme.upperBound...]
            path = afterScheme.firstIndex(of: "/").map { afterScheme[$0...] } ?? ""
        }
        if let query = path.firstIndex(of: "?") { path = path[..<query] }
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        guard segments.count == 5, segments[0].isEmpty, segments[1] == "v1", segments[2] == "projects",
              !segments[3].isEmpty, segments[4] == "messages:send" else { return nil }
        return String(segments[3])
    }
}

extension FCMHTTPAPI {
    /// googleapiclient writes its batch with Python's email generator, whose line ends are bare LF;
    /// Google accepts that, multipart-kit wants CRLF (RFC 2046). A body whose delimiters are bare
    /// LF gets every bare LF made CRLF (JSON bodies hold no raw line breaks, only escaped ones).
    static func withCRLF(_ body: ByteBuffer, boundary: String) -> ByteBuffer {
        let bytes = body.readableBytesView
        let crlfDelimiter = Array("\r\n--\(boundary)".utf8)
        if bytes.count >= crlfDelimiter.count,
           bytes.withContiguousStorageIfAvailable({ Self.contains($0, crlfDelimiter) }) ?? true {
            return body
        }
        var out = ByteBuffer()
        out.reserveCapacity(bytes.count + bytes.count / 16)
        var previous: UInt8 = 0
        for byte in bytes {
            if byte == 0x0A && previous != 0x0D { out.writeInteger(UInt8(0x0D)) }
            out.writeInteger(byte)
            previous = byte
        }
        return out
    }

    static func contains(_ haystack: UnsafeBufferPointer<UInt8>, _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            var j = 1
            while j < needle.count && haystack[start + j] == needle[j] { j += 1 }
            if j == needle.count { return true }
        }
        return false
    }
}

/// One part of a batch: its headers (lower-case names) and body.
struct BatchPart {
    var headers: [String: String]
    var body: ByteBuffer
    var contentID: String? { headers["content-id"] }
}

struct BatchParseError: Error, CustomStringConvertible {
    var description: String
}

extension FCMHTTPAPI {
    /// Splits a multipart body with multipart-kit's parser.
    static func parseBatch(_ body: ByteBuffer, boundary: String) throws(BatchParseError) -> [BatchPart] {
        let body = withCRLF(body, boundary: boundary)
        let parser = MultipartParser(boundary: boundary)
        var parts: [BatchPart] = []
        var current = BatchPart(headers: [:], body: ByteBuffer())
        var tooMany = false
        parser.onHeader = { name, value in current.headers[name.lowercased()] = value }
        parser.onBody = { chunk in current.body.writeBuffer(&chunk) }
        parser.onPartComplete = {
            if parts.count > maximumBatchParts { tooMany = true; return }
            parts.append(current)
            current = BatchPart(headers: [:], body: ByteBuffer())
        }
        do { try parser.execute(body) } catch {
            throw BatchParseError(description: "the multipart/mixed body does not parse with its boundary")
        }
        if tooMany { throw BatchParseError(description: "more than \(maximumBatchParts) parts") }
        return parts
    }
}

/// The HTTP request inside an `application/http` part: request line, headers, blank line, body.
struct BatchRequest {
    var method: String
    var path: String
    /// Lower-case names.
    var headers: [String: String]
    var body: String

    static func parse(_ part: ByteBuffer) -> Result<BatchRequest, GoogleError> {
        let bad = { (why: String) in
            Result<BatchRequest, GoogleError>.failure(.invalidArgument("Invalid batch part: \(why)", field: "",
                                                                       description: "malformed application/http part"))
        }
        guard let text = UTF8Body.text(part) else { return bad(UTF8Body.invalidMessage) }
        // The head ends at the first empty line (CRLF CRLF, or LF LF from lenient writers).
        let head: Substring, body: Substring
        if let r = text.range(of: "\r\n\r\n") {
            (head, body) = (text[..<r.lowerBound], text[r.upperBound...])
        } else if let r = text.range(of: "\n\n") {
            (head, body) = (text[..<r.lowerBound], text[r.upperBound...])
        } else {
            (head, body) = (Substring(text), "")
        }
        // "\r\n" is one Character in Swift: split on any newline Character.
        var lines = head.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        while let first = lines.first, first.isEmpty { lines.removeFirst() }
        guard let requestLine = lines.first else { return bad("no request line") }
        let words = requestLine.split(separator: " ")
        guard words.count == 3 || words.count == 2, words[0].utf8.count <= 16 else {
            return bad("expected \"POST /v1/projects/P/messages:send HTTP/1.1\"")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { return bad("a header line without a colon") }
            headers[line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()] =
                line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return .success(BatchRequest(method: String(words[0]), path: String(words[1]), headers: headers, body: String(body)))
    }
}
