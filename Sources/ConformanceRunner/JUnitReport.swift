import AppServerAudit

/// JUnit XML, the shape CI systems read (Jenkins, GitLab, GitHub annotations): one testsuite per
/// suite, one testcase per scenario, a `<failure>` with the reason and the audit's findings.
public enum JUnitReport {
    public static func xml(_ results: [ScenarioResult]) -> String {
        var suites: [String] = []
        for suite in results.map(\.suite).reduce(into: [String](), { if !$0.contains($1) { $0.append($1) } }) {
            let mine = results.filter { $0.suite == suite }
            var cases = ""
            for r in mine {
                cases += "    <testcase classname=\"conformance.\(escape(suite))\" name=\"\(escape(r.scenario.name))\" time=\"\(seconds(r.seconds))\">\n"
                if !r.passed {
                    cases += "      <failure message=\"\(escape(r.failure ?? "failed"))\" type=\"conformance\">\(escape(details(r)))</failure>\n"
                }
                if !r.appServerLog.isEmpty {
                    cases += "      <system-out>\(escape(r.appServerLog))</system-out>\n"
                }
                cases += "    </testcase>\n"
            }
            let failures = mine.filter { !$0.passed }.count
            suites.append("  <testsuite name=\"\(escape(suite))\" tests=\"\(mine.count)\" failures=\"\(failures)\" errors=\"0\" skipped=\"0\" time=\"\(seconds(mine.map(\.seconds).reduce(0, +)))\">\n\(cases)  </testsuite>\n")
        }
        let failures = results.filter { !$0.passed }.count
        return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            + "<testsuites name=\"ccs-emulator conformance\" tests=\"\(results.count)\" failures=\"\(failures)\" errors=\"0\" time=\"\(seconds(results.map(\.seconds).reduce(0, +)))\">\n"
            + suites.joined() + "</testsuites>\n"
    }

    /// The reason, the scenario's rules with their sources, and every finding with its evidence.
    public static func details(_ r: ScenarioResult) -> String {
        var lines = [r.failure ?? "", "", r.scenario.description]
        for rule in r.scenario.rules {
            let source = r.scenario.appServer == .http ? rule.httpSource : rule.source
            lines.append("rule \(rule.rawValue): \(rule.title) (\(source))")
        }
        for f in r.findings {
            lines.append("finding \(f.rule.rawValue) [\(f.source)]: \(f.text)")
            for e in f.evidence {
                lines.append("  at \(e.at) \(e.what)\(e.messageID.map { " message_id=\($0)" } ?? "")\(e.connection.map { " connection=\($0)" } ?? "")")
            }
        }
        return lines.joined(separator: "\n")
    }

    static func seconds(_ s: Double) -> String {
        let ms = Int((s * 1000).rounded())
        let frac = String(ms % 1000)
        return "\(ms / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac)"
    }

    /// XML text and attribute escaping; characters XML 1.0 cannot carry (most C0 controls) become U+FFFD.
    static func escape(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for scalar in s.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\t", "\n", "\r": out.unicodeScalars.append(scalar)
            default:
                if scalar.value < 0x20 || scalar.value == 0xFFFE || scalar.value == 0xFFFF {
                    out += "\u{FFFD}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }
}
