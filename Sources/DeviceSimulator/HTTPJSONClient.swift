import CCSProtocol
import PushDomain
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOConcurrencyHelpers

/// A minimal HTTP/1.1 JSON client for the emulator's own API (plain HTTP on loopback).
public struct HTTPJSONClient: Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public var status: Int
        public var body: String
        public var description: String { "HTTP \(status): \(body)" }
    }

    /// The request got no complete answer in time (a port that accepts but never answers).
    public struct Timeout: Error, CustomStringConvertible {
        public var description: String { "no HTTP answer in time" }
    }

    public let host: String
    public let port: Int
    let group: any EventLoopGroup
    /// Limit for connecting and for the whole answer.
    public var timeout: TimeAmount = .seconds(30)

    public init(host: String, port: Int, group: any EventLoopGroup) {
        self.host = host
        self.port = port
        self.group = group
    }

    /// Parses `http://HOST:PORT[/]`.
    /// `CCS_ADMIN_TOKEN` from the environment, if set.
    static let adminToken: String? = ProcessInfo.processInfo.environment["CCS_ADMIN_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }

    public static func parseBaseURL(_ url: String) -> (host: String, port: Int)? {
        var rest = Substring(url)
        guard rest.hasPrefix("http://") else { return nil }
        rest = rest.dropFirst(7)
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            let host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            let port = after.hasPrefix(":") ? Int(after.dropFirst()) : 80
            return port.map { (host, $0) }
        }
        let parts = rest.split(separator: ":", maxSplits: 1)
        guard let h = parts.first, !h.isEmpty else { return nil }
        let port = parts.count == 2 ? Int(parts[1]) : 80
        return port.map { (String(h), $0) }
    }

    public func request(_ method: HTTPMethod, _ path: String, json: JSONValue? = nil) async throws -> (status: Int, body: String) {
        try await request(method, path, body: json?.encoded(), contentType: json == nil ? nil : "application/json")
    }

    /// Any body and extra headers (an `Authorization`, a form body): what `send --api legacy|v1` needs.
    public func request(_ method: HTTPMethod, _ path: String, body text: String?, contentType: String?,
                        headers extra: [(String, String)] = []) async throws -> (status: Int, body: String) {
        let collector = ResponseCollector()
        let channel = try await ClientBootstrap(group: group)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(collector.handler())
                }
            }
            .connect(host: host, port: port).get()
        var headers = HTTPHeaders([("Host", "\(host):\(port)"), ("Connection", "close")])
        for (name, value) in extra { headers.add(name: name, value: value) }
        // An emulator started with --admin-token wants it on its admin API (docs/hardening.md).
        if path.hasPrefix("/emulator/v1/"), !headers.contains(name: "Authorization"), let token = Self.adminToken {
            headers.add(name: "Authorization", value: "Bearer " + token)
        }
        var body: ByteBuffer?
        if let text {
            let buffer = ByteBuffer(string: text)
            if let contentType { headers.add(name: "Content-Type", value: contentType) }
            headers.add(name: "Content-Length", value: String(buffer.readableBytes))
            body = buffer
        }
        let expiry = channel.eventLoop.scheduleTask(in: timeout) { channel.pipeline.fireErrorCaught(Timeout()) }
        defer { expiry.cancel() }
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        if let body { channel.write(HTTPClientRequestPart.body(.byteBuffer(body)), promise: nil) }
        try await channel.writeAndFlush(HTTPClientRequestPart.end(nil)).get()
        let result = try await collector.result.futureResult(on: channel.eventLoop).get()
        try? await channel.close()
        return result
    }

    public func getJSON(_ path: String) async throws -> JSONValue {
        try await checked(request(.GET, path))
    }

    public func postJSON(_ path: String, _ body: JSONValue) async throws -> JSONValue {
        try await checked(request(.POST, path, json: body))
    }

    public func deleteJSON(_ path: String) async throws -> JSONValue {
        try await checked(request(.DELETE, path))
    }

    private func checked(_ response: (status: Int, body: String)) throws -> JSONValue {
        guard (200..<300).contains(response.status) else { throw Failure(status: response.status, body: response.body) }
        return try JSONValue.parse(response.body)
    }
}

/// Collects one response; lives on the channel's event loop.
final class ResponseCollector: Sendable {
    final class Promise: Sendable {
        let box = NIOLockedValueBox<EventLoopPromise<(status: Int, body: String)>?>(nil)
        func futureResult(on loop: any EventLoop) -> EventLoopFuture<(status: Int, body: String)> {
            loop.submit {
                self.box.withLockedValue { p -> EventLoopFuture<(status: Int, body: String)> in
                    if let p { return p.futureResult }
                    let new = loop.makePromise(of: (status: Int, body: String).self)
                    p = new
                    return new.futureResult
                }
            }.flatMap { $0 }
        }
    }
    let result = Promise()

    func handler() -> Handler { Handler(result: result) }

    final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPClientResponsePart
        let result: Promise
        var status = 0
        var body = ByteBuffer()
        var done = false

        init(result: Promise) { self.result = result }

        private func promise(_ context: ChannelHandlerContext) -> EventLoopPromise<(status: Int, body: String)> {
            result.box.withLockedValue { p in
                if let p { return p }
                let new = context.eventLoop.makePromise(of: (status: Int, body: String).self)
                p = new
                return new
            }
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): status = Int(head.status.code)
            case .body(var part): body.writeBuffer(&part)
            case .end:
                guard !done else { return }
                done = true
                promise(context).succeed((status, String(buffer: body)))
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            if !done { done = true; promise(context).fail(ChannelError.eof) }
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            if !done { done = true; promise(context).fail(error) }
            context.close(promise: nil)
        }
    }
}
