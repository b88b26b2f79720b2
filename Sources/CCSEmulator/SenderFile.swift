import CCSProtocol
import PushDomain
import Foundation
import GoogleAuth

/// What `--config` holds, and what to say about it.
struct SenderFile {
    var file: String
    /// Every top-level key, sorted.
    var foundKeys: [String]
    var unknownKeys: [String] = []
    var sendersListed = false
    var senders: [String: String] = [:]
    /// Named projects → sender IDs (`"project_id"` on a sender), so that HTTP v1's
    /// `projects/NAME/messages:send` sends as that sender.
    var projects: [String: String] = [:]

    init(file: String, foundKeys: [String]) {
        self.file = file
        self.foundKeys = foundKeys
    }

    /// `"Senders"`, `"sender"`, `"sender_ids"`: near misses of the one key the file may have.
    static func looksLikeSenders(_ key: String) -> Bool {
        key != "senders" && key.lowercased().hasPrefix("sender")
    }

    func unknownKeyWarning(_ key: String) -> String {
        let suggestion = Self.looksLikeSenders(key) ? "did you mean \"senders\"?" : "the only key read is \"senders\""
        return "--config \(file): ignoring the unknown top-level key \"\(key)\" (\(suggestion))"
    }

    /// Why strict mode has nobody to let in.
    var noSendersExplanation: String {
        if sendersListed { return "--auth strict: --config \(file) lists no senders (\"senders\" is empty)" }
        var found = foundKeys.isEmpty ? "the object is empty" : "found keys: " + foundKeys.joined(separator: ", ")
        if foundKeys.contains(where: Self.looksLikeSenders) { found += "; did you mean \"senders\"?" }
        return "--auth strict: --config \(file) lists no senders (\(found))"
    }

    /// Reads `{"senders":[{"sender_id":…,"server_key":…,"project_id":…}]}` (`project_id` optional). Every error names the file and says where
    /// and what is wrong; keys other than "senders" are returned for a warning (a typo such as
    /// "sender" would otherwise silently configure nothing).
    static func load(from file: String) throws -> SenderFile {
        let text: String
        do { text = try String(contentsOfFile: file, encoding: .utf8) } catch {
            throw ConfigurationError("cannot read --config \(file): \(error.localizedDescription)")
        }
        let root: [String: JSONValue]
        do {
            let value = try JSONValue.parse(text)
            guard case .object(let object) = value else {
                throw ConfigurationError("--config \(file): the top level is \(value.kindDescription), expected a JSON object {\"senders\":[…]}")
            }
            root = object
        } catch let error as JSONParseError {
            throw ConfigurationError("--config \(file) is not valid JSON: \(describe(error, in: text))")
        }
        var result = SenderFile(file: file, foundKeys: root.keys.sorted())
        result.unknownKeys = result.foundKeys.filter { $0 != "senders" }
        guard let listed = root["senders"] else { return result }
        guard case .array(let list) = listed else {
            throw ConfigurationError("--config \(file): \"senders\" is \(listed.kindDescription), expected an array of {\"sender_id\":…,\"server_key\":…}")
        }
        result.sendersListed = true
        for (index, entry) in list.enumerated() {
            try result.add(entry, place: "--config \(file): senders[\(index)]")
        }
        return result
    }

    /// One entry of "senders": its sender ID and key, and its project when it names one.
    private mutating func add(_ entry: JSONValue, place: String) throws {
        guard case .object(let e) = entry else {
            throw ConfigurationError("\(place) is \(entry.kindDescription), expected {\"sender_id\":…,\"server_key\":…}")
        }
        let id: String
        switch e["sender_id"] {
        case .string(let s)?: id = s
        case .int(let n)? where n >= 0: id = String(n)
        case nil: throw ConfigurationError("\(place) has no \"sender_id\"")
        case let other?: throw ConfigurationError("\(place): \"sender_id\" is \(other.kindDescription), expected a string of digits or a non-negative integer")
        }
        guard !id.isEmpty, id.count <= 32, id.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw ConfigurationError("\(place): \"sender_id\" \"\(id)\" is not 1 to 32 digits")
        }
        guard case .string(let key)? = e["server_key"] else {
            throw ConfigurationError("\(place) (sender \(id)) has no \"server_key\" string")
        }
        guard !key.isEmpty else { throw ConfigurationError("\(place) (sender \(id)): \"server_key\" is empty") }
        senders[id] = key
        switch e["project_id"] {
        case nil, .null?:
            break
        case .string(let project)?:
            try addProject(project, sender: id, place: place)
        case let other?:
            throw ConfigurationError("\(place) (sender \(id)): \"project_id\" is \(other.kindDescription), expected a string")
        }
    }

    private mutating func addProject(_ project: String, sender id: String, place: String) throws {
        guard ProjectID.isValid(project) else {
            throw ConfigurationError("\(place) (sender \(id)): \"project_id\" \(JSONValue.string(String(project.prefix(80))).encoded()) is invalid: \(ProjectID.rule)")
        }
        // A project number is the sender ID itself (Google accepts projects/NUMBER/…).
        if ProjectID.isNumber(project), project != id {
            throw ConfigurationError("\(place) (sender \(id)): \"project_id\" \"\(project)\" is a project number, which is the sender ID itself; use a project name, or leave it out")
        }
        if let other = projects[project], other != id {
            throw ConfigurationError("\(place) (sender \(id)): \"project_id\" \"\(project)\" is already sender \(other)'s")
        }
        projects[project] = id
    }

    /// "Unexpected character (}) at line 4, column 3 (a trailing comma?)": the parser counts bytes,
    /// people count lines.
    static func describe(_ error: JSONParseError, in text: String) -> String {
        let bytes = Array(text.utf8)
        let position = min(max(error.position, 0), bytes.count)
        var line = 1, lineStart = 0
        for i in 0..<position where bytes[i] == UInt8(ascii: "\n") {
            line += 1
            lineStart = i + 1
        }
        // Columns in characters, not bytes.
        let column = String(decoding: bytes[lineStart..<position], as: UTF8.self).count + 1
        var hint = ""
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") || bytes[position] == UInt8(ascii: "]"),
           let previous = bytes[..<position].last(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }),
           previous == UInt8(ascii: ",") {
            hint = " (a trailing comma? JSON allows none)"
        } else if position < bytes.count, bytes[position] == UInt8(ascii: "'") {
            hint = " (JSON strings take double quotes)"
        }
        return "\(error.reason) at line \(line), column \(column)\(hint)"
    }
}
