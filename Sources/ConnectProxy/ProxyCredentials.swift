import NIOCore

/// The user and password proxy mode asks of every CONNECT when `serve --proxy-auth-file` names them:
/// HTTP Basic (RFC 7617) in `Proxy-Authorization`, as curl (`--proxy-user`), requests and
/// `HTTPS_PROXY=http://user:password@host:port` send them. Without the header, or with others, the
/// answer is 407 with `Proxy-Authenticate: Basic`, and the connection closes.
public struct ProxyCredentials: Sendable, Equatable {
    public static let realm = "ccs-emulator"
    public var user: String
    public var password: String

    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// `user:password` on the file's first line (RFC 7617 forbids a colon in the user id).
    public static func parse(_ text: String) -> Result<ProxyCredentials, ProxyCredentialsError> {
        let line = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        guard let colon = line.firstIndex(of: ":") else { return .failure(.init("the first line is not user:password")) }
        let user = String(line[..<colon]), password = String(line[line.index(after: colon)...])
        guard !user.isEmpty, !password.isEmpty else { return .failure(.init("the user and the password must not be empty")) }
        guard line.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) else {
            return .failure(.init("user:password holds a control character"))
        }
        return .success(ProxyCredentials(user: user, password: password))
    }

    /// Nil when the head's `Proxy-Authorization` names these credentials; else the 407 to answer.
    func check(head: ArraySlice<UInt8>) -> ConnectRefusal? {
        let text = String(decoding: head, as: UTF8.self)
        let values = text.split(whereSeparator: \.isNewline).dropFirst().compactMap { line -> Substring? in
            guard let colon = line.firstIndex(of: ":"), Self.trimmed(line[..<colon]).lowercased() == "proxy-authorization" else {
                return nil
            }
            return Self.trimmed(line[line.index(after: colon)...])
        }
        guard let value = values.first else {
            return .proxyAuthenticationRequired("this proxy asks for a user and password (Proxy-Authorization: Basic; serve --proxy-auth-file)")
        }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard values.count == 1, parts.count == 2, parts[0].lowercased() == "basic",
              let decoded = Self.base64(Self.trimmed(parts[1])),
              Self.equal(decoded, Array("\(user):\(password)".utf8)) else {
            return .proxyAuthenticationRequired("the proxy's user or password is wrong")
        }
        return nil
    }

    /// Without HTTP's optional white space (spaces and tabs) at either end.
    static func trimmed(_ s: Substring) -> Substring {
        var s = s
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }

    /// Standard base64 (RFC 4648 §4) with its padding; nil for anything else.
    static func base64(_ text: Substring) -> [UInt8]? {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 1024, bytes.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        var accumulator: UInt32 = 0, bits = 0, padding = 0
        for b in bytes {
            let value: UInt8
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = b - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = b - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = b - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "/"): value = 63
            case UInt8(ascii: "="): padding += 1; continue
            default: return nil
            }
            guard padding == 0 else { return nil }  // nothing after the padding
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return padding <= 2 ? out : nil
    }

    /// Compares without stopping at the first difference, so the time taken does not tell a guesser
    /// how much of the password was right.
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<min(a.count, b.count) { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}

public struct ProxyCredentialsError: Error, Equatable, CustomStringConvertible {
    public var description: String
    init(_ d: String) { description = d }
}
