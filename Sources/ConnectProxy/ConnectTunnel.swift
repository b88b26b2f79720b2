import NIOCore

/// A host and port a client asks to reach with `CONNECT host:port`. The host is kept in lower case
/// without a trailing dot, so that `FCM.googleapis.com.:443` is the same destination as
/// `fcm.googleapis.com:443`.
public struct ConnectDestination: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        var h = host.lowercased()
        if h.hasSuffix(".") { h.removeLast() }
        self.host = h
        self.port = port
    }

    public var description: String { "\(host):\(port)" }
}

/// Why a CONNECT was not tunnelled: the answer the client gets before the connection closes.
public struct ConnectRefusal: Equatable, Sendable, Error {
    public var status: Int
    public var reason: String
    /// A line for the client (and the log) saying what to change.
    public var text: String

    public static func badRequest(_ text: String) -> ConnectRefusal { .init(status: 400, reason: "Bad Request", text: text) }
    public static func forbidden(_ text: String) -> ConnectRefusal { .init(status: 403, reason: "Forbidden", text: text) }
    public static func methodNotAllowed(_ text: String) -> ConnectRefusal {
        .init(status: 405, reason: "Method Not Allowed", text: text)
    }
    public static func badGateway(_ text: String) -> ConnectRefusal { .init(status: 502, reason: "Bad Gateway", text: text) }
    /// RFC 9110 §15.5.8: the proxy wants (other) credentials; `Proxy-Authenticate` names the scheme.
    public static func proxyAuthenticationRequired(_ text: String) -> ConnectRefusal {
        .init(status: 407, reason: "Proxy Authentication Required", text: text)
    }

    /// The whole HTTP answer; the connection closes after it.
    public var response: String {
        let body = text + "\n"
        var head = "HTTP/1.1 \(status) \(reason)\r\nContent-Type: text/plain; charset=UTF-8\r\n"
        if status == 405 { head += "Allow: CONNECT\r\n" }
        if status == 407 { head += "Proxy-Authenticate: Basic realm=\"\(ProxyCredentials.realm)\", charset=\"UTF-8\"\r\n" }
        return head + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
    }
}

/// The client side of one proxy connection, as a value-type state machine (swift-nio style): it is
/// fed events (bytes read, the upstream connected or failed) and answers with what the channel
/// handler must do. It holds no channel and does no I/O, so every path is tested without sockets.
///
/// Lifecycle: read the request head (`CONNECT host:port HTTP/1.1`, header lines, an empty line) →
/// the destination is one the emulator plays → connect upstream, holding whatever the client sends
/// meanwhile (a client may send its TLS ClientHello right behind the head) → `200 Connection
/// established`, then the held bytes, then plain relaying. Anything else ends in one refusal.
public struct ConnectTunnel: Sendable {
    /// The longest request head read (request line plus headers); longer is a 400. Real clients send
    /// one line and two or three headers, well under 1 KiB.
    public static let maximumHeadBytes = 8 * 1024
    public static let established = "HTTP/1.1 200 Connection established\r\n\r\n"

    enum State {
        case readingHead([UInt8])
        case connecting(ConnectDestination, pending: [ByteBuffer])
        case relaying
        case closed
    }

    public enum ReadAction: Equatable {
        /// The head is not complete yet.
        case wait
        /// Open a connection to this allowed destination; call `upstreamConnected` or `upstreamFailed`.
        case connect(ConnectDestination)
        /// Held until the upstream connection is open.
        case hold
        /// Relay these bytes upstream.
        case forward(ByteBuffer)
        /// Write `refusal.response`, then close.
        case refuse(ConnectRefusal)
        /// The connection is closing: drop the bytes.
        case drop
    }

    private(set) var state: State = .readingHead([])
    let allowed: Set<ConnectDestination>
    /// When set (`serve --proxy-auth-file`), every CONNECT must carry them (`Proxy-Authorization: Basic`).
    let credentials: ProxyCredentials?

    public init(allowed: Set<ConnectDestination>, credentials: ProxyCredentials? = nil) {
        self.allowed = allowed
        self.credentials = credentials
    }

    public mutating func read(_ buffer: ByteBuffer) -> ReadAction {
        switch state {
        case .readingHead(var head):
            head.append(contentsOf: buffer.readableBytesView)
            guard let end = Self.endOfHead(head) else {
                if head.count > Self.maximumHeadBytes {
                    return refuse(.badRequest("the request head is longer than \(Self.maximumHeadBytes) bytes"))
                }
                state = .readingHead(head)
                return .wait
            }
            guard end <= Self.maximumHeadBytes else {
                return refuse(.badRequest("the request head is longer than \(Self.maximumHeadBytes) bytes"))
            }
            switch Self.destination(head: head[..<end], allowed: allowed) {
            case .failure(let refusal):
                return refuse(refusal)
            case .success(let destination):
                if let credentials, let refusal = credentials.check(head: head[..<end]) { return refuse(refusal) }
                let rest = head[(end)...]
                state = .connecting(destination, pending: rest.isEmpty ? [] : [ByteBuffer(bytes: rest)])
                return .connect(destination)
            }
        case .connecting(let destination, var pending):
            pending.append(buffer)
            state = .connecting(destination, pending: pending)
            return .hold
        case .relaying:
            return .forward(buffer)
        case .closed:
            return .drop
        }
    }

    /// The upstream is open: answer 200, then relay what the client sent meanwhile, in order.
    public mutating func upstreamConnected() -> [ByteBuffer] {
        guard case .connecting(_, let pending) = state else { return [] }
        state = .relaying
        return pending
    }

    /// The emulator's own listener could not be reached (it is shutting down).
    public mutating func upstreamFailed(_ description: String) -> ConnectRefusal? {
        guard case .connecting(let destination, _) = state else { return nil }
        state = .closed
        return .badGateway("the emulator's listener for \(destination) did not answer: \(description)")
    }

    public mutating func closed() {
        state = .closed
    }

    private mutating func refuse(_ refusal: ConnectRefusal) -> ReadAction {
        state = .closed
        return .refuse(refusal)
    }

    /// The index just past the empty line that ends the head (CRLF CRLF, or bare LF LF as lenient
    /// HTTP parsers accept), or nil while it has not come yet.
    static func endOfHead(_ bytes: [UInt8]) -> Int? {
        var i = 0
        while i < bytes.count {
            if bytes[i] == 0x0A {
                if i + 1 < bytes.count, bytes[i + 1] == 0x0A { return i + 2 }
                if i + 2 < bytes.count, bytes[i + 1] == 0x0D, bytes[i + 2] == 0x0A { return i + 3 }
            }
            i += 1
        }
        return nil
    }

    /// Reads the request line. Header lines are only checked to be text: the proxy needs none of
    /// them but `Proxy-Authorization`, and that one only with credentials (`ProxyCredentials`).
    static func destination(head: ArraySlice<UInt8>, allowed: Set<ConnectDestination>) -> Result<ConnectDestination, ConnectRefusal> {
        // Text only: a NUL or another control byte (other than tab, CR, LF) is garbage, not HTTP.
        guard head.allSatisfy({ $0 == 0x09 || $0 == 0x0A || $0 == 0x0D || ($0 >= 0x20 && $0 < 0x7F) }) else {
            return .failure(.badRequest("the request is not HTTP text (a TLS or binary client talking to the proxy port directly?)"))
        }
        let text = String(decoding: head, as: UTF8.self)
        // "\r\n" is one Character in Swift: split on any newline Character.
        let firstLine = text.split(maxSplits: 1, omittingEmptySubsequences: false, whereSeparator: \.isNewline).first ?? ""
        let parts = firstLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty,
              parts[2] == "HTTP/1.1" || parts[2] == "HTTP/1.0" else {
            return .failure(.badRequest("expected a request line \"CONNECT host:port HTTP/1.1\""))
        }
        guard parts[0] == "CONNECT" else {
            return .failure(.methodNotAllowed(
                "this port is a CONNECT proxy for Google's push hosts only; \(parts[0].prefix(16)) is not served (send HTTP requests to the emulator's HTTP port)"))
        }
        let target = parts[1]
        // host:port, the port 1–5 digits; no userinfo, no brackets (an IPv6 literal is never a Google host).
        guard let colon = target.lastIndex(of: ":"), colon != target.startIndex else {
            return .failure(.badRequest("the CONNECT target must be host:port"))
        }
        let host = target[..<colon], portText = target[target.index(after: colon)...]
        guard (1...5).contains(portText.count), portText.allSatisfy({ $0.isASCII && $0.isNumber }),
              let port = Int(portText), (1...65535).contains(port) else {
            return .failure(.badRequest("the CONNECT target's port must be 1 to 65535"))
        }
        guard host.utf8.count <= 253, host.utf8.allSatisfy({ Self.isHostByte($0) }) else {
            return .failure(.badRequest("the CONNECT target's host is not a DNS name"))
        }
        let destination = ConnectDestination(host: String(host), port: port)
        guard allowed.contains(destination) else {
            return .failure(.forbidden(
                "\(destination) is not a host the emulator plays; this proxy only tunnels to "
                    + allowed.map(\.description).sorted().joined(separator: ", ")))
        }
        return .success(destination)
    }

    static func isHostByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D || b == 0x2E
            || b == 0x5B || b == 0x5D || b == 0x3A || b == 0x5F
    }
}
