@testable import FCMHTTP
import CCSProtocol
import PushDomain
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@Suite struct BatchTests {
    static func part(_ id: String, _ requestLine: String, bearer: String?, body: String) -> String {
        var text = "--BOUNDARY\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\nMIME-Version: 1.0\r\n"
        text += "Content-ID: <\(id)>\r\n\r\n\(requestLine)\r\nContent-Type: application/json\r\nMIME-Version: 1.0\r\n"
        if let bearer { text += "authorization: Bearer \(bearer)\r\n" }
        text += "content-length: \(body.utf8.count)\r\nhost: fcm.googleapis.com\r\n\r\n\(body)\r\n"
        return text
    }

    /// The shape googleapiclient's BatchHttpRequest sends: parts answered in order, ids echoed.
    @Test func partsAreAnsweredInOrderWithTheirIDs() async throws {
        let f = try Fixture()
        let token = try await f.register()
        try await f.test { client in
            let access = try await f.accessToken(client: client)
            let send = "POST /v1/projects/123456789/messages:send HTTP/1.1"
            var body = Self.part("a+0", send, bearer: access, body: #"{"message":{"token":"\#(token)","data":{"n":"1"}}}"#)
            body += Self.part("a+1", send, bearer: access, body: #"{"message":{"token":"unknown"}}"#)
            body += Self.part("a+2", send, bearer: nil, body: #"{"message":{"token":"\#(token)","data":{"n":"2"}}}"#)
            body += Self.part("a+3", "POST https://fcm.googleapis.com/v1/projects/123456789/messages:send HTTP/1.1",
                              bearer: access, body: #"{"message":{"token":"\#(token)","data":{"n":"3"}}}"#)
            body += "--BOUNDARY--\r\n"
            let response = try await client.execute(uri: "/batch", method: .post,
                                                    headers: [.contentType: "multipart/mixed; boundary=\"BOUNDARY\""],
                                                    body: ByteBuffer(string: body))
            #expect(response.status == .ok)
            let text = String(buffer: response.body)
            let ids = ["<response-a+0>", "<response-a+1>", "<response-a+2>", "<response-a+3>"]
            let positions = ids.compactMap { text.range(of: "Content-ID: " + $0)?.lowerBound }
            #expect(positions.count == 4 && positions == positions.sorted(), "\(text)")
            #expect(text.components(separatedBy: "HTTP/1.1 200 OK").count == 3, "\(text)")
            #expect(text.contains("HTTP/1.1 400 Bad Request"))
            #expect(text.contains("HTTP/1.1 401 Unauthorized"))
            #expect(try f.queue(token).map { try JSONValue.parse($0.payload)["data"]?["n"]?.stringValue } == ["1", "3"])
        }
    }

    @Test func notABatchIs400() async throws {
        let f = try Fixture()
        try await f.test { client in
            let plain = try await client.execute(uri: "/batch", method: .post, headers: [.contentType: "application/json"],
                                                 body: ByteBuffer(string: "{}"))
            #expect(plain.status == .badRequest)
            let empty = try await client.execute(uri: "/batch", method: .post,
                                                 headers: [.contentType: "multipart/mixed; boundary=x"],
                                                 body: ByteBuffer(string: "--x--\r\n"))
            #expect(empty.status == .badRequest)
        }
    }

    @Test func boundariesAndPaths() {
        #expect(FCMHTTPAPI.multipartBoundary("multipart/mixed; boundary=\"===abc==\"") == "===abc==")
        #expect(FCMHTTPAPI.multipartBoundary("Multipart/Mixed;charset=x; BOUNDARY=b") == "b")
        #expect(FCMHTTPAPI.multipartBoundary("multipart/form-data; boundary=b") == nil)
        #expect(FCMHTTPAPI.multipartBoundary("multipart/mixed; boundary=") == nil)
        #expect(FCMHTTPAPI.multipartBoundary("multipart/mixed; boundary=" + String(repeating: "b", count: 71)) == nil)
        #expect(FCMHTTPAPI.messagesSendProject("/v1/projects/p-1/messages:send") == "p-1")
        #expect(FCMHTTPAPI.messagesSendProject("https://fcm.googleapis.com/v1/projects/9/messages:send?x=1") == "9")
        #expect(FCMHTTPAPI.messagesSendProject("/v1/projects//messages:send") == nil)
        #expect(FCMHTTPAPI.messagesSendProject("/v1/projects/p/messages") == nil)
        #expect(FCMHTTPAPI.responseContentID("<abc+1>") == "<response-abc+1>")
    }
}
