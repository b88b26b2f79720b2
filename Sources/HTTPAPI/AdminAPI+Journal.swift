import CCSEngine
import CCSProtocol
import Foundation
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
        v1.get("events") { request, _ in
            let journal = try self.requireJournal()
            let q = request.uri.queryParameters
            let sender = q["sender"].map(String.init), token = q["token"].map(String.init)
            let messageID = q["message_id"].map(String.init)
            let events = journal.follow()
            // The first bytes say the stream follows the journal: a client that waits for them knows
            // every event recorded from then on will come.
            let body = ResponseBody { writer in
                try await writer.write(ByteBuffer(string: ": following the message journal\n\n"))
                for await e in events {
                    if let sender, e.sender != sender { continue }
                    if let token, e.token != token { continue }
                    if let messageID, e.messageID != messageID { continue }
                    try await writer.write(ByteBuffer(string: "id: \(e.seq)\nevent: \(e.kind.rawValue)\ndata: \(e.json)\n\n"))
                }
                try await writer.finish(nil)
            }
            return Response(status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"], body: body)
        }
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
