import Hummingbird
import NIOCore

/// The rules every HTTP route applies to a request body before reading it (docs/bad-input.md):
///
/// - A declared `Content-Length` over the route's limit is refused at once with 413, without waiting
///   for a body that may never come (a client that announces 10^12 bytes and sends ten would
///   otherwise hold the request open until its deadline). The listener closes such a connection once
///   the 413 is written (`HTTPRequestDeadlines`).
/// - A body longer than the limit without a declared length (chunked) is refused with 413 when the
///   limit is passed; nothing past it is buffered.
/// - Text must be UTF-8: JSON that is not (RFC 8259 §8.1) is a 400 on every route, as on the CCS
///   port, instead of text with U+FFFD in place of the bad bytes.
extension Request {
    public func collectBody(limit: Int) async throws -> ByteBuffer {
        if let declared = headers[.contentLength] {
            // Digits only (NIO's parser checked that); too many for an Int is over any limit.
            guard let length = Int(declared), length <= limit else { throw HTTPError(.contentTooLarge) }
        }
        return try await body.collect(upTo: limit)
    }
}

public enum UTF8Body {
    /// The body as text, or nil when it is not valid UTF-8.
    public static func text(_ buffer: ByteBuffer) -> String? {
        buffer.withUnsafeReadableBytes { String(validating: $0, as: UTF8.self) }
    }

    /// What a route says when `text` returns nil.
    public static let invalidMessage = "the body is not valid UTF-8 (RFC 8259 §8.1)"
}
