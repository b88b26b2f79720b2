import Hummingbird
import NIOCore

/// The dashboard at `/` on the HTTP port (docs/dashboard.md): a page, a script and a style sheet,
/// embedded in the binary at build time (SwiftPM `embedInCode`), so that nothing is fetched from
/// anywhere at run time and the binary is all a user needs. The page reads and controls the
/// emulator through the admin API under `/emulator/v1/`.
public enum Dashboard {
    struct Asset: Sendable {
        let bytes: [UInt8]
        let contentType: String
    }

    static let assets: [String: Asset] = [
        "/": Asset(bytes: PackageResources.index_html, contentType: "text/html; charset=utf-8"),
        "/dashboard/app.js": Asset(bytes: PackageResources.app_js, contentType: "text/javascript; charset=utf-8"),
        "/dashboard/app.css": Asset(bytes: PackageResources.app_css, contentType: "text/css; charset=utf-8"),
    ]

    public static func addRoutes(to router: Router<some RequestContext>) {
        for (path, asset) in assets {
            router.get(RouterPath(path)) { _, _ in
                Response(status: .ok,
                         headers: [.contentType: asset.contentType, .cacheControl: "no-cache",
                                   // The page loads only its own script and style, talks only to this origin, and is never
                                   // framed (a page of another site cannot overlay it and click its buttons).
                                   .contentSecurityPolicy: "default-src 'self'; img-src * data:; style-src 'self'; frame-ancestors 'none'"],
                         body: .init(byteBuffer: ByteBuffer(bytes: asset.bytes)))
            }
        }
    }
}
