import ArgumentParser
import Foundation
import Logging
import CCSProtocol
import PushDomain

/// `serve --log-format json`: one JSON object per log line on stderr (time, level, label, message,
/// metadata, source), for log collectors that parse structured logs.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    private static let lock = NSLock()

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let (level, message, source) = (event.level, event.message, event.source)
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let explicit = event.metadata { merged.merge(explicit) { $1 } }
        var w = JSONObjectWriter()
        w.add("time", ISO8601DateFormatter.string(from: Date(), timeZone: .gmt,
                                                   formatOptions: [.withInternetDateTime, .withFractionalSeconds]))
        w.add("level", level.rawValue)
        w.add("label", label)
        w.add("message", message.description)
        if !merged.isEmpty { w.add("metadata", json: Self.json(.dictionary(merged))) }
        w.add("source", source)
        let text = w.finished() + "\n"
        Self.lock.lock()
        defer { Self.lock.unlock() }
        try? FileHandle.standardError.write(contentsOf: Data(text.utf8))
    }

    private static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case .string(let s): return .string(s)
        case .stringConvertible(let c): return .string(c.description)
        case .array(let items): return .array(items.map(json))
        case .dictionary(let d): return .object(d.mapValues(json))
        }
    }
}

/// How `serve` writes its log.
enum LogFormat: String, ExpressibleByArgument, CaseIterable {
    /// swift-log's default line: `time level label: [metadata] message`.
    case text
    case json
}
