/// Outgoing stanzas, written straight into a ByteBuffer.
public enum StanzaWriter {
    public static let streamNS = "http://etherx.jabber.org/streams"

    public static func streamHeader(to domain: String) -> String {
        "<stream:stream to=\"\(domain)\" version=\"1.0\" xmlns=\"jabber:client\" xmlns:stream=\"\(streamNS)\">"
    }

    /// SASL PLAIN (RFC 4616): `\0user\0password`, base64.
    public static func saslPlain(user: String, password: String) -> String {
        let payload = Array("\0\(user)\0\(password)".utf8)
        return "<auth xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\" mechanism=\"PLAIN\">\(base64(payload))</auth>"
    }

    public static func bind(resource: String?) -> String {
        if let resource {
            return "<iq type=\"set\" id=\"bind-1\"><bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\"><resource>\(resource)</resource></bind></iq>"
        }
        return "<iq type=\"set\" id=\"bind-1\"><bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\"/></iq>"
    }

    public static let session = "<iq type=\"set\" id=\"sess-1\"><session xmlns=\"urn:ietf:params:xml:ns:xmpp-session\"/></iq>"
    public static let startTLS = "<starttls xmlns=\"urn:ietf:params:xml:ns:xmpp-tls\"/>"

    public static func base64(_ bytes: [UInt8]) -> String {
        let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        var i = 0
        while i + 2 < bytes.count {
            let n = (UInt32(bytes[i]) << 16) | (UInt32(bytes[i + 1]) << 8) | UInt32(bytes[i + 2])
            out += [table[Int(n >> 18)], table[Int((n >> 12) & 63)], table[Int((n >> 6) & 63)], table[Int(n & 63)]]
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [table[Int(n >> 18)], table[Int((n >> 12) & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        } else if rest == 2 {
            let n = (UInt32(bytes[i]) << 16) | (UInt32(bytes[i + 1]) << 8)
            out += [table[Int(n >> 18)], table[Int((n >> 12) & 63)], table[Int((n >> 6) & 63)], UInt8(ascii: "=")]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
