/// An `Authorization` header: `Bearer TOKEN` (HTTP v1, and firebase-admin-node's legacy calls) or
/// the legacy APIs' `key=SERVER_KEY`. Read byte by byte: Foundation's trimming goes through NSString
/// on Linux, and this runs per request. Spaces and tabs around the header, the key and the token are
/// ignored, the scheme's letters may be in any case, and a space or a tab follows `Bearer`.
enum AuthorizationHeader: Equatable {
    case missing
    case bearer(String)
    case key(String)
    /// Neither `key=…` nor `Bearer …`.
    case malformed

    static func parse(_ value: String?) -> AuthorizationHeader {
        let header = Array((value ?? "").utf8)
        let isSpace = { (b: UInt8) in b == 0x20 || b == 0x09 }
        func trimmed(_ from: Int, _ to: Int) -> String {
            var (lo, hi) = (from, to)
            while lo < hi, isSpace(header[lo]) { lo += 1 }
            while hi > lo, isSpace(header[hi - 1]) { hi -= 1 }
            return String(decoding: header[lo..<hi], as: UTF8.self)
        }
        var start = 0, end = header.count
        while start < end, isSpace(header[start]) { start += 1 }
        while end > start, isSpace(header[end - 1]) { end -= 1 }
        guard start < end else { return .missing }
        // ASCII letters compared without case (| 0x20 lower-cases them).
        func startsWith(_ word: String) -> Bool {
            let w = Array(word.utf8)
            return end - start >= w.count && zip(header[start..<start + w.count], w).allSatisfy { $0 | 0x20 == $1 }
        }
        if startsWith("bearer"), end - start > 6, isSpace(header[start + 6]) { return .bearer(trimmed(start + 7, end)) }
        guard startsWith("key") else { return .malformed }
        var equals = start + 3
        while equals < end, header[equals] == 0x20 { equals += 1 }
        guard equals < end, header[equals] == UInt8(ascii: "=") else { return .malformed }
        return .key(trimmed(equals + 1, end))
    }
}
