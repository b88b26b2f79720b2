@testable import CCSEmulator
import HTTPTypes
import Testing

/// The rules that keep web pages away from the admin API (docs/hardening.md, "Threat model"), as values.
@Suite struct AdminRequestGuardTests {
    let policy = HostPolicy(bindHost: "127.0.0.1", publicHosts: ["emulator.test", "[fd00::1]"])

    @Test func routesAreJudgedByTheRouteResolvedNotThePathWritten() {
        #expect(AdminRoutes.kind(ofEndpoint: "/emulator/v1/info") == .admin)
        #expect(AdminRoutes.kind(ofEndpoint: "/emulator/v1/devices/:token/state") == .admin)
        #expect(AdminRoutes.kind(ofEndpoint: "emulator/v1/credentials") == .admin)
        #expect(AdminRoutes.kind(ofEndpoint: "/metrics") == .admin)
        #expect(AdminRoutes.kind(ofEndpoint: "/emulator/v1/health") == .publicAdmin)
        #expect(AdminRoutes.kind(ofEndpoint: "/emulator/v1/ca.pem") == .publicAdmin)
        #expect(AdminRoutes.kind(ofEndpoint: "/") == .dashboard)
        #expect(AdminRoutes.kind(ofEndpoint: "/dashboard/app.js") == .dashboard)
        #expect(AdminRoutes.kind(ofEndpoint: "/fcm/send") == .pushService)
        #expect(AdminRoutes.kind(ofEndpoint: "/v1/projects/:project/messages:send") == .pushService)
        #expect(AdminRoutes.kind(ofEndpoint: "/emulator/v1x") == .pushService)
        #expect(AdminRoutes.kind(ofEndpoint: nil) == .pushService)  // no route: a 404 that tells nothing
    }

    @Test func onlyThisMachinesNamesAreHosts() {
        for host in ["127.0.0.1", "127.0.0.1:8080", "localhost", "LOCALHOST:1", "localhost.", "127.9.8.7:80",
                     "[::1]:8080", "[::1]", "::1", "emulator.test", "Emulator.Test:443", "[fd00::1]:9"] {
            #expect(policy.allows(host: host), "\(host)")
        }
        for host in ["rebind.attacker.example", "127.0.0.1.attacker.example", "localhost.attacker.example",
                     "127.0.0.256", "128.0.0.1", "10.0.0.1:8080", "[::2]", "", "emulator.test.evil"] {
            #expect(!policy.allows(host: host), "\(host)")
        }
        #expect(policy.refusal(of: .init(method: .get, host: nil)) == .hostNotAllowed("(none)"))
        #expect(policy.refusal(of: .init(method: .get, host: "evil.example")) == .hostNotAllowed("evil.example"))
        #expect(policy.refusal(of: .init(method: .get, host: "localhost:8080", origin: "https://evil.example")) == nil,
                "a read is judged by its Host alone: the Same-Origin Policy keeps its answer from a page")
    }

    @Test func stateChangesComeOnlyFromThisOrigin() {
        let host = "127.0.0.1:8080"
        for method in [HTTPRequest.Method.post, .put, .patch, .delete] {
            #expect(policy.refusal(of: .init(method: method, host: host, origin: "https://evil.example")) == .crossOrigin("https://evil.example"))
            #expect(policy.refusal(of: .init(method: method, host: host, origin: "null")) == .crossOrigin("null"))
            #expect(policy.refusal(of: .init(method: method, host: host, origin: "http://127.0.0.1:9999")) != nil, "another port is another origin")
            #expect(policy.refusal(of: .init(method: method, host: host, secFetchSite: "cross-site")) != nil)
            #expect(policy.refusal(of: .init(method: method, host: host, origin: "http://127.0.0.1:8080", secFetchSite: "same-site")) != nil)
            #expect(policy.refusal(of: .init(method: method, host: host, origin: "http://127.0.0.1:8080", secFetchSite: "same-origin")) == nil)
            #expect(policy.refusal(of: .init(method: method, host: host)) == nil, "curl and scripts send no Origin")
        }
    }

    @Test func aBodyMustBeJSON() {
        let host = "localhost"
        #expect(policy.refusal(of: .init(method: .post, host: host, contentType: "text/plain", hasBody: true)) == .notJSON("text/plain"))
        #expect(policy.refusal(of: .init(method: .post, host: host, hasBody: true)) == .notJSON(nil))
        #expect(policy.refusal(of: .init(method: .post, host: host, contentType: "application/x-www-form-urlencoded", hasBody: true)) != nil)
        #expect(policy.refusal(of: .init(method: .post, host: host, contentType: "Application/JSON; charset=utf-8", hasBody: true)) == nil)
        #expect(policy.refusal(of: .init(method: .post, host: host, contentType: "text/plain", hasBody: false)) == nil,
                "a body-less POST needs no type")
    }

    @Test func publicHostValuesAreNamesOnly() {
        #expect(HostPolicy.isValidName("emulator.test"))
        #expect(HostPolicy.isValidName("[fd00::1]"))
        #expect(!HostPolicy.isValidName("http://emulator.test"))
        #expect(!HostPolicy.isValidName("emulator.test/path"))
        #expect(!HostPolicy.isValidName(""))
    }
}
