@testable import ConnectProxy
import NIOCore
import Testing

@Suite struct ProxyCredentialsTests {
    let credentials = ProxyCredentials(user: "dev", password: "s3cret:with colon")

    func head(_ authorization: String?) -> String {
        "CONNECT fcm.googleapis.com:443 HTTP/1.1\r\nHost: fcm.googleapis.com:443\r\n"
            + (authorization.map { "Proxy-Authorization: \($0)\r\n" } ?? "") + "\r\n"
    }

    /// base64 of `user:password`, as curl --proxy-user and requests write it.
    func basic(_ userPassword: String) -> String {
        let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        var out = "", bytes = Array(userPassword.utf8)
        while bytes.count % 3 != 0 { bytes.append(0) }
        let padding = (3 - userPassword.utf8.count % 3) % 3
        for i in stride(from: 0, to: bytes.count, by: 3) {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            for shift in [18, 12, 6, 0] { out.append(table[Int(n >> UInt32(shift) & 63)]) }
        }
        return "Basic " + String(out.dropLast(padding)) + String(repeating: "=", count: padding)
    }

    @Test func theRightCredentialsOpenTheTunnel() {
        var tunnel = ConnectTunnel(allowed: [fcm], credentials: credentials)
        #expect(feed(&tunnel, head(basic("dev:s3cret:with colon"))) == .connect(fcm))
        // The header's name in any case, and the scheme too (RFC 9110 §11.1).
        var other = ConnectTunnel(allowed: [fcm], credentials: credentials)
        let token = basic("dev:s3cret:with colon").dropFirst("Basic ".count)
        let lower = "CONNECT fcm.googleapis.com:443 HTTP/1.1\r\nproxy-authorization:   basic \(token)\r\n\r\n"
        #expect(feed(&other, lower) == .connect(fcm))
    }

    @Test(arguments: [nil, "Basic", "Bearer abc", "Basic !!!!", "Basic ZGV2Ondyb25n"])
    func missingOrWrongCredentialsAre407WithTheChallenge(_ authorization: String?) {
        var tunnel = ConnectTunnel(allowed: [fcm], credentials: credentials)
        let action = feed(&tunnel, head(authorization))
        guard case .refuse(let refusal) = action else {
            Issue.record("expected a refusal, got \(action)")
            return
        }
        #expect(refusal.status == 407)
        #expect(refusal.response.contains("Proxy-Authenticate: Basic realm=\"ccs-emulator\""))
        #expect(feed(&tunnel, "more") == .drop)
    }

    @Test func twoAuthorizationHeadersAreRefused() {
        var tunnel = ConnectTunnel(allowed: [fcm], credentials: credentials)
        let good = basic("dev:s3cret:with colon")
        let text = "CONNECT fcm.googleapis.com:443 HTTP/1.1\r\nProxy-Authorization: \(good)\r\nProxy-Authorization: \(good)\r\n\r\n"
        #expect(refusalStatus(feed(&tunnel, text)) == 407)
    }

    @Test func withoutCredentialsTheHeaderIsIgnored() {
        var tunnel = ConnectTunnel(allowed: [fcm])
        #expect(feed(&tunnel, head("Basic bm9ib2R5Om5vdGhpbmc=")) == .connect(fcm))
    }

    @Test func aDisallowedHostIsStill403EvenWithGoodCredentials() {
        var tunnel = ConnectTunnel(allowed: [fcm], credentials: credentials)
        let text = "CONNECT example.com:443 HTTP/1.1\r\nProxy-Authorization: \(basic("dev:s3cret:with colon"))\r\n\r\n"
        #expect(refusalStatus(feed(&tunnel, text)) == 403)
    }

    @Test func theFileIsUserColonPasswordOnItsFirstLine() {
        #expect(ProxyCredentials.parse("dev:pw\nignored\n") == .success(ProxyCredentials(user: "dev", password: "pw")))
        #expect(ProxyCredentials.parse("dev:a:b") == .success(ProxyCredentials(user: "dev", password: "a:b")))
        for bad in ["", "nocolon", ":pw", "dev:", "de\u{7}v:pw"] {
            guard case .failure = ProxyCredentials.parse(bad) else {
                Issue.record("\(bad.debugDescription) was taken")
                continue
            }
        }
    }

    @Test func base64IsStrict() {
        #expect(ProxyCredentials.base64("ZGV2OnB3") == Array("dev:pw".utf8))
        #expect(ProxyCredentials.base64("ZGV2OnB3eA==") == Array("dev:pwx".utf8))
        for bad in ["", "ZGV", "ZG=2", "ZGV2OnB3eA=a", "ZGV2OnB3e===", "ZGV2Om*3"] {
            #expect(ProxyCredentials.base64(Substring(bad)) == nil, "\(bad)")
        }
    }
}
