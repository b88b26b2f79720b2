import Dashboard
import Hummingbird
import HummingbirdTesting
import Testing

/// The dashboard's assets, served from the binary through the router test client.
@Suite struct DashboardTests {
    @Test func thePageAndItsAssetsAreServedFromTheBinary() async throws {
        let router = Router()
        Dashboard.addRoutes(to: router)
        let app = Application(router: router)
        try await app.test(.router) { client in
            let page = try await client.execute(uri: "/", method: .get)
            #expect(page.status == .ok)
            #expect(page.headers[.contentType] == "text/html; charset=utf-8")
            #expect(page.headers[.contentSecurityPolicy]?.hasPrefix("default-src 'self'") == true)
            let html = String(buffer: page.body)
            #expect(html.contains("<title>ccs-emulator</title>") && html.contains("/dashboard/app.js"))
            // Nothing from elsewhere: every script and style sheet is the binary's own.
            #expect(!html.contains("http://") && !html.contains("https://"))
            let script = try await client.execute(uri: "/dashboard/app.js", method: .get)
            #expect(script.status == .ok && script.headers[.contentType] == "text/javascript; charset=utf-8")
            #expect(String(buffer: script.body).contains("new EventSource(api + \"/events\")"))
            let style = try await client.execute(uri: "/dashboard/app.css", method: .get)
            #expect(style.status == .ok && style.headers[.contentType] == "text/css; charset=utf-8")
            #expect(try await client.execute(uri: "/dashboard/nope.js", method: .get).status == .notFound)
        }
    }
}
