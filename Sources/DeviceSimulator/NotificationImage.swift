import AsyncHTTPClient
import CCSProtocol
import PushDomain
import NIOCore
import NIOHTTP1

/// The image rules of each platform's notification code (docs/platforms.md, "Images"): how long the
/// download may take, how large it may be, and what counts as an image it can show.
public struct ImageRules: Sendable, Equatable {
    public enum Check: Sendable, Equatable {
        /// Android's `BitmapFactory`: the bytes must decode (the Content-Type is not looked at).
        case decodableBytes
        /// iOS's `UNNotificationAttachment` via FirebaseMessaging's extension helper: the file type
        /// comes from the response's MIME type, and only JPEG, GIF and PNG images attach.
        case attachmentMIMEType
        /// A browser's notification image: any image it decodes.
        case browserImage
    }

    public var timeLimit: TimeAmount
    public var maximumBytes: Int
    public var check: Check

    public init(timeLimit: TimeAmount, maximumBytes: Int, check: Check) {
        self.timeLimit = timeLimit
        self.maximumBytes = maximumBytes
        self.check = check
    }

    /// firebase-messaging's `ImageDownload`: 1 MiB at most, waited for 5 seconds.
    public static let android = ImageRules(timeLimit: .seconds(5), maximumBytes: 1 << 20, check: .decodableBytes)
    /// A notification service extension has about 30 seconds; an image attachment is at most 10 MB.
    public static let ios = ImageRules(timeLimit: .seconds(30), maximumBytes: 10_000_000, check: .attachmentMIMEType)
    /// The emulator's choice for browsers (no published limit): 30 seconds and 10 MB.
    public static let web = ImageRules(timeLimit: .seconds(30), maximumBytes: 10_000_000, check: .browserImage)

    public static func forPlatform(_ platform: String) -> ImageRules {
        switch platform {
        case "ios": .ios
        case "web": .web
        default: .android
        }
    }

    static let attachmentTypes: Set<String> = ["image/jpeg", "image/jpg", "image/png", "image/gif"]

    /// The decoders' magic numbers: PNG, JPEG, GIF, WebP, BMP.
    static func looksLikeImage(_ bytes: ByteBuffer) -> Bool {
        let head = bytes.getBytes(at: bytes.readerIndex, length: min(bytes.readableBytes, 12)) ?? []
        func starts(_ prefix: [UInt8]) -> Bool { head.count >= prefix.count && Array(head.prefix(prefix.count)) == prefix }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) || starts([0xFF, 0xD8, 0xFF]) || starts(Array("GIF8".utf8))
            || starts(Array("BM".utf8)) { return true }
        return head.count >= 12 && Array(head[0..<4]) == Array("RIFF".utf8) && Array(head[8..<12]) == Array("WEBP".utf8)
    }

    /// Whether the platform shows what arrived.
    public func shows(_ body: ByteBuffer, contentType: String?) -> Bool {
        let type = contentType?.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        switch check {
        case .decodableBytes: return Self.looksLikeImage(body)
        case .attachmentMIMEType: return type.map(Self.attachmentTypes.contains) == true && Self.looksLikeImage(body)
        case .browserImage: return Self.looksLikeImage(body)
        }
    }
}

/// What became of a notification's image: the `image` object of the device's event.
public struct ImageOutcome: Sendable, Equatable {
    public init(url: String, status: Int?, bytes: Int, contentType: String?, shown: Bool, reason: String?) {
        self.url = url
        self.status = status
        self.bytes = bytes
        self.contentType = contentType
        self.shown = shown
        self.reason = reason
    }

    public var url: String
    /// The HTTP status, nil when no answer came (time limit, connection failure, not fetched).
    public var status: Int?
    /// Bytes received (up to the limit and one chunk past it).
    public var bytes: Int
    public var contentType: String?
    /// The notification shows the image.
    public var shown: Bool
    /// Why it is not shown: `timeout`, `too_large`, `not_an_image`, `http_status`, `connection`,
    /// `bad_url`, `no_service_extension`.
    public var reason: String?

    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "url": .string(url), "status": status.map { .int(Int64($0)) } ?? .null, "bytes": .int(Int64(bytes)),
            "content_type": contentType.map(JSONValue.string) ?? .null, "shown": .bool(shown),
        ]
        if let reason { fields["reason"] = .string(reason) }
        return .object(fields)
    }
}

/// Downloads notification images like the phone's notification code: one request each, in its own
/// task, so a slow, huge or missing image never holds up another message.
public final class NotificationImageLoader: Sendable {
    let client: HTTPClient
    public let rules: ImageRules

    public init(group: any EventLoopGroup, rules: ImageRules) {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .follow(max: 5, allowCycles: false)
        configuration.timeout.connect = rules.timeLimit
        client = HTTPClient(eventLoopGroupProvider: .shared(group), configuration: configuration)
        self.rules = rules
    }

    public func shutdown() async {
        try? await client.shutdown()
    }

    /// The image a rendered view asks for, and what became of it; nil when the view carries none.
    /// An iOS view whose payload names an image that no service extension fetches (no
    /// `mutable-content: 1`) is reported without a download.
    public func outcome(for view: JSONValue) async -> ImageOutcome? {
        if let url = view["image"]?.stringValue { return await load(url) }
        if view["platform"]?.stringValue == "ios", let url = view["payload"]?["fcm_options"]?["image"]?.stringValue {
            return ImageOutcome(url: url, status: nil, bytes: 0, contentType: nil, shown: false, reason: "no_service_extension")
        }
        return nil
    }

    struct TimeLimitReached: Error {}

    public func load(_ url: String) async -> ImageOutcome {
        let lower = url.lowercased()
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
            return ImageOutcome(url: url, status: nil, bytes: 0, contentType: nil, shown: false, reason: "bad_url")
        }
        let progress = Progress(url: url)
        let limit = rules.timeLimit
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await self.download(url, into: progress) }
                group.addTask {
                    try await Task.sleep(nanoseconds: UInt64(max(limit.nanoseconds, 0)))
                    throw TimeLimitReached()
                }
                try await group.next()
                group.cancelAll()
            }
        } catch is TimeLimitReached {
            return progress.outcome(shown: false, reason: "timeout")
        } catch let stop as Stop {
            return progress.outcome(shown: false, reason: stop.reason)
        } catch let error as HTTPClientError where [.deadlineExceeded, .readTimeout, .connectTimeout].contains(error) {
            // The client's own deadline (the same limit) may come first.
            return progress.outcome(shown: false, reason: "timeout")
        } catch {
            return progress.outcome(shown: false, reason: "connection")
        }
        let shown = rules.shows(progress.body, contentType: progress.contentType)
        return progress.outcome(shown: shown, reason: shown ? nil : "not_an_image")
    }

    struct Stop: Error { var reason: String }

    /// What has arrived so far; written by the download task only, read once it has ended.
    final class Progress: @unchecked Sendable {
        // @unchecked: the download task writes, and the reader runs after the task group has
        // finished (a happens-before through the group), never at the same time.
        let url: String
        var status: Int?
        var contentType: String?
        var body = ByteBuffer()

        init(url: String) { self.url = url }

        func outcome(shown: Bool, reason: String?) -> ImageOutcome {
            ImageOutcome(url: url, status: status, bytes: body.readableBytes, contentType: contentType, shown: shown,
                         reason: reason)
        }
    }

    private func download(_ url: String, into progress: Progress) async throws {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "image/*")
        let response = try await client.execute(request, timeout: rules.timeLimit)
        progress.status = Int(response.status.code)
        progress.contentType = response.headers.first(name: "Content-Type")
        guard (200..<300).contains(Int(response.status.code)) else { throw Stop(reason: "http_status") }
        if let length = response.headers.first(name: "Content-Length").flatMap(Int.init), length > rules.maximumBytes {
            throw Stop(reason: "too_large")
        }
        for try await var chunk in response.body {
            progress.body.writeBuffer(&chunk)
            if progress.body.readableBytes > rules.maximumBytes { throw Stop(reason: "too_large") }
        }
    }
}
