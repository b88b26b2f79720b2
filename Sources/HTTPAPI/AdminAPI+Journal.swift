import CCSEngine
import CCSProtocol
import PushDomain
import Foundation
import HTTPTypes
import Hummingbird
import MessageJournal
import NIOCore

/// The message journal's routes (docs/admin-api.md#message-journal): list and filter messages, one
/// message's events, and the live stream of events as Server-Sent Events.
extension AdminAPI {
    func addJournalRoutes(to v1: RouterGroup<some RequestContext>) {
        v1.get("messages") { request, _ in
            let journal = try self.requireJournal()
            let filter = try Self.journalFilter(request.uri.queryParameters)
            let messages = try await Self.readingJournal { try await journal.messages(filter) }
            return JSONResponse.make(.object(["messages": .array(messages.map { Self.parsed($0.json) })]))
        }
        v1.get("messages/:id") { _, context in
            let journal = try self.requireJournal()
            // FCM's ids hold a `%` followed by hex digits: a client may send it as it is or as `%25`.
            // The id is looked up as written first, then percent-decoded (as the tray's tap route does).
            let raw = try context.parameters.require("id")
            var events = try await Self.readingJournal { try await journal.events(messageID: raw) }
            if events.isEmpty, let decoded = raw.removingPercentEncoding, decoded != raw {
                events = try await Self.readingJournal { try await journal.events(messageID: decoded) }
            }
            // Found by the client's id, the events may be of several messages (a retry reuses the id):
            // the newest one that is not a fault names the answer. Its status is the furthest state it
            // reached, as the list shows it (a message its device confirmed is delivered, though the
            // answer to its app server was recorded after the confirmation).
            guard let last = events.last(where: { $0.kind != .faultApplied }) ?? events.last,
                  let status = JournalEventKind.furthest(of: events.lazy.filter { $0.messageID == last.messageID }.map(\.kind)) else {
                throw APIError.notFound("the journal has no message \(raw)")
            }
            return JSONResponse.make(.object([
                "message_id": .string(last.messageID),
                "status": .string(status.rawValue),
                "events": .array(events.map { Self.parsed($0.json) }),
            ]))
        }
        v1.get("events") { request, _ in try await self.eventStream(request) }
    }

    /// `GET /emulator/v1/events`: the journal's events as Server-Sent Events, live, resumed after
    /// `Last-Event-ID` (what a reconnecting `EventSource` sends) from the journal's database. A comment
    /// line every `heartbeat` finds a client that went away, so its place among the
    /// `MessageJournal.maximumFollowers` is given back (429 past them).
    func eventStream(_ request: Request) async throws -> Response {
        let journal = try requireJournal()
        let q = request.uri.queryParameters
        let filter = EventStreamFilter(sender: q["sender"].map(String.init), token: q["token"].map(String.init),
                                       messageID: q["message_id"].map(String.init))
        // Per the SSE spec a client sends back an id it was given; anything else starts a live stream.
        let resumeAfter = request.headers[HTTPField.Name("Last-Event-ID")!]
            .flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }.flatMap { (0..<Int64.max).contains($0) ? $0 : nil }
        guard let live = journal.follow() else {
            throw APIError(status: .tooManyRequests,
                           message: "\(MessageJournal.maximumFollowers) clients already follow the events; close one",
                           googleStatus: "RESOURCE_EXHAUSTED")
        }
        let heartbeat = Self.eventStreamHeartbeat
        let body = ResponseBody { writer in
            // The first bytes say the stream follows the journal: a client that waits for them knows
            // every event recorded from then on will come.
            try await writer.write(ByteBuffer(string: ": following the message journal\n\n"))
            var newest: Int64 = -1
            if let resumeAfter {
                for e in try await journal.events(after: resumeAfter) {
                    newest = e.seq
                    if filter.admits(e) { try await writer.write(Self.sse(e)) }
                }
            }
            let (items, continuation) = AsyncStream<EventStreamItem>.makeStream(
                bufferingPolicy: .bufferingNewest(MessageJournal.followerBuffer))
            let pump = Task {
                for await e in live { continuation.yield(.event(e)) }
                continuation.finish()  // the journal ended its followers: a graceful stop
            }
            let beat = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: heartbeat)
                    continuation.yield(.heartbeat)
                }
            }
            defer { pump.cancel(); beat.cancel() }
            for await item in items {
                switch item {
                case .heartbeat: try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                case .event(let e) where e.seq > newest && filter.admits(e): try await writer.write(Self.sse(e))
                case .event: continue
                }
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"], body: body)
    }

    static let eventStreamHeartbeat: Duration = .seconds(15)

    static func sse(_ e: JournalEvent) -> ByteBuffer {
        ByteBuffer(string: "id: \(e.seq)\nevent: \(e.kind.rawValue)\ndata: \(e.json)\n\n")
    }

    private func requireJournal() throws -> MessageJournal {
        guard let journal = engine.journal else {
            throw APIError(status: .notFound, message: "the message journal is off (serve --journal off)", googleStatus: "NOT_FOUND")
        }
        return journal
    }

    static func journalFilter(_ q: Parameters) throws -> JournalFilter {
        var filter = JournalFilter()
        filter.sender = q["sender"].map(String.init)
        filter.token = q["token"].map(String.init)
        filter.topic = q["topic"].map { $0.hasPrefix("/topics/") ? String($0) : "/topics/" + $0 }
        if let status = q["status"] {
            guard let kind = JournalEventKind(rawValue: String(status)) else {
                throw APIError.badRequest("status: one of \(JournalEventKind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            filter.status = kind
        }
        if let since = q["since"] {
            guard let ms = Int64(since), ms >= 0 else { throw APIError.badRequest("since: milliseconds since the epoch") }
            filter.since = ms
        }
        if let limit = q["limit"] {
            guard let n = Int(limit), (1...JournalFilter.maximumLimit).contains(n) else {
                throw APIError.badRequest("limit: 1 to \(JournalFilter.maximumLimit)")
            }
            filter.limit = n
        }
        return filter
    }

    static func parsed(_ json: String) -> JSONValue { (try? JSONValue.parse(json)) ?? .null }

    static func readingJournal<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch let error as APIError { throw error } catch {
            throw APIError(status: .serviceUnavailable, message: "the journal could not be read: \(error)", googleStatus: "UNAVAILABLE")
        }
    }
}

/// What `GET /emulator/v1/events?sender=&token=&message_id=` lets through.
struct EventStreamFilter: Sendable {
    var sender: String?
    var token: String?
    var messageID: String?

    func admits(_ e: JournalEvent) -> Bool {
        (sender == nil || e.sender == sender) && (token == nil || e.token == token)
            && (messageID == nil || e.messageID == messageID)
    }
}

enum EventStreamItem: Sendable {
    case event(JournalEvent)
    case heartbeat
}
