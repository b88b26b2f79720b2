import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Short, human texts for the errors a client tool meets on its way to the emulator. NIO's own
/// descriptions name file descriptors and nested error structs; a person needs "connection refused".
public enum ConnectionFailure {
    public static func describe(_ error: any Error) -> String {
        switch error {
        case let e as NIOConnectionError:
            if let dns = e.dnsAError ?? e.dnsAAAAError { return "cannot resolve \(e.host): \(dns)" }
            if let first = e.connectionErrors.first { return describe(first.error) }
            return "cannot connect to \(e.host):\(e.port)"
        case let e as IOError:
            switch e.errnoCode {
            case ECONNREFUSED: return "connection refused: nothing listens there"
            case ETIMEDOUT: return "connection timed out"
            case EHOSTUNREACH, ENETUNREACH: return "no route to the host"
            case ECONNRESET: return "the server reset the connection"
            default: return String(cString: strerror(e.errnoCode))
            }
        case let e as ChannelError:
            switch e {
            case .eof, .ioOnClosedChannel, .alreadyClosed, .outputClosed, .inputClosed:
                return "the server closed the connection without answering"
            case .connectTimeout: return "connection timed out"
            default: return "\(e)"
            }
        case let e as NIOSSLError:
            if case .handshakeFailed(let inner) = e { return "TLS handshake failed: " + tlsReason(inner) }
            if e == .uncleanShutdown { return "the server closed the connection without answering" }
            return "TLS: \(e)"
        case let e as NIOSSLExtraError:
            return "TLS: \(e)"
        case let e as HTTPParserError:
            return "the answer is not HTTP (\(e))"
        case is HTTPJSONClient.Timeout:
            return "no answer within the time limit"
        default:
            return "\(error)"
        }
    }

    /// BoringSSL's reason code (`…:OPENSSL_internal:WRONG_VERSION_NUMBER at …/tls_record.cc:127`),
    /// with what it means for the common ones.
    static func tlsReason(_ error: BoringSSLError) -> String {
        let text = "\(error)"
        guard let marker = text.range(of: "OPENSSL_internal:") else { return text }
        let code = String(text[marker.upperBound...].prefix { $0.isUppercase || $0.isNumber || $0 == "_" })
        switch code {
        case "WRONG_VERSION_NUMBER": return code + " (the other side does not speak TLS on this port)"
        case "CERTIFICATE_VERIFY_FAILED": return code + " (the server's certificate is not from the trusted CA)"
        case "": return text
        default: return code
        }
    }

    /// True for a TLS handshake that failed, whatever the reason (wrong CA, not a TLS port).
    public static func isTLSHandshake(_ error: any Error) -> Bool {
        if case .handshakeFailed? = error as? NIOSSLError { return true }
        return error is NIOSSLExtraError
    }
}
