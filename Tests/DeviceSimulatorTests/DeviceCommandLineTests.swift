import CCSProtocol
import Testing
import DeviceSimulator

/// How the `device` command reads each stdin line (docs/device-protocol.md): every command form, and
/// the lines it takes for no command.
@Suite struct DeviceCommandLineTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var line: String
        var command: DeviceCommandLine
        var testDescription: String { line }
    }

    static let commands: [Row] = [
        Row(line: #"{"go":"offline"}"#, command: .go("offline")),
        Row(line: #"{"go":"online"}"#, command: .go("online")),
        Row(line: #"{"go":"background"}"#, command: .go("background")),
        Row(line: #"{"go":"uninstall"}"#, command: .go("uninstall")),
        // Any state is taken here; the session refuses the ones it does not know.
        Row(line: #"{"go":"sideways"}"#, command: .go("sideways")),
        Row(line: #"{"tap":"m-7"}"#, command: .tap("m-7")),
        Row(line: #"{"upstream":{"data":{"k":"v"},"message_id":"u1"}}"#,
            command: .upstream(["data": .object(["k": .string("v")]), "message_id": .string("u1")])),
        Row(line: #"{"upstream":{}}"#, command: .upstream([:])),
        Row(line: #"{"subscribe":"news"}"#, command: .subscribe("news", true)),
        Row(line: #"{"unsubscribe":"news"}"#, command: .subscribe("news", false)),
        Row(line: #"{"show":"groups"}"#, command: .show("groups")),
        Row(line: #"{"refresh":"token"}"#, command: .refreshToken),
        // Surrounding blanks and tabs do not matter.
        Row(line: " \t{\"go\":\"idle\"}  ", command: .go("idle")),
    ]

    @Test(arguments: commands)
    func command(_ row: Row) {
        #expect(DeviceCommandLine(line: row.line) == row.command)
    }

    /// Lines that hold no command: each becomes `.invalid` with the line as trimmed.
    @Test(arguments: [
        "hello",
        #"{"go":"offline""#,
        #"["go","offline"]"#,
        #""go""#,
        "{}",
        #"{"fly":"away"}"#,
        #"{"go":1}"#,
        #"{"go":null}"#,
        #"{"tap":["m-1"]}"#,
        #"{"upstream":"hello"}"#,
        #"{"upstream":[{"data":{}}]}"#,
        #"{"subscribe":true}"#,
        #"{"show":{"what":"groups"}}"#,
        #"{"refresh":"everything"}"#,
        #"{"refresh":true}"#,
    ])
    func notACommand(_ line: String) {
        #expect(DeviceCommandLine(line: "  " + line + " ") == .invalid(line))
    }

    @Test(arguments: ["", " ", "\t \t"])
    func blankLineIsSkipped(_ line: String) {
        #expect(DeviceCommandLine(line: line) == nil)
    }
}
