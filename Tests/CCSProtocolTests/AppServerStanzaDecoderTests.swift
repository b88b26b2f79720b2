import Testing
@testable import CCSProtocol
import PushDomain

@Suite("Stanza errors (no NACK possible)")
struct StanzaErrorTests {
    @Test func notJSON() {
        #expect(decode(#"{"to":"a","#).stanzaErrorText
            == "InvalidJson: JSON_PARSING_ERROR : Unexpected end of input at position 10")
        #expect(decode("hello").stanzaErrorText
            == "InvalidJson: JSON_PARSING_ERROR : Unexpected character (h) at position 0")
    }

    @Test func emptyOrBlankText() {
        #expect(decode("").stanzaErrorText == "InvalidJson: JSON_PARSING_ERROR : Unexpected end of input at position 0")
        #expect(decode(" \n\t ").stanzaErrorText == "InvalidJson: JSON_PARSING_ERROR : Unexpected end of input at position 4")
    }

    @Test func notAnObject() {
        #expect(decode(#"["to","m"]"#).stanzaErrorText
            == "InvalidJson: JSON_PARSING_ERROR : Expected a JSON object but found an array")
        #expect(decode(#""text""#).stanzaErrorText
            == "InvalidJson: JSON_PARSING_ERROR : Expected a JSON object but found a string")
        #expect(decode("42").stanzaErrorText
            == "InvalidJson: JSON_PARSING_ERROR : Expected a JSON object but found a number")
    }

    @Test func aRepeatedKeyIsRefused() {
        // One message_id: NACK INVALID_JSON with it, whichever key is repeated, at any depth.
        for text in [#"{"to":"a","to":"b","message_id":"m1","data":{}}"#,
                     #"{"to":"a","message_id":"m1","data":{"k":"1","k":"2"}}"#] {
            guard case .failure(.nack(let nack)) = decode(text) else { Issue.record("not a NACK: \(text)"); continue }
            #expect(nack.messageID == "m1" && nack.code == .invalidJSON, "\(text)")
            #expect(nack.description.contains("Duplicate field"))
        }
        // message_id itself twice: no NACK could say which; a stanza error.
        #expect(decode(#"{"to":"a","message_id":"m1","message_id":"m2"}"#).stanzaErrorText?.contains("Duplicate field \"message_id\"") == true)
        // A message_id inside data is not the message's.
        guard case .failure(.nack(let nested)) = decode(#"{"to":"a","message_id":"m3","data":{"message_id":"x","message_id":"y"}}"#) else {
            Issue.record("a repeated key inside data is a NACK for the message"); return
        }
        #expect(nested.messageID == "m3")
    }

    @Test func stillXMLEscapedJSONIsNotJSON() {
        // The XML layer must decode entities before handing the text over.
        #expect(decode(#"{&quot;to&quot;:&quot;a&quot;}"#).stanzaErrorText
            == "InvalidJson: JSON_PARSING_ERROR : Unexpected character (&) at position 1")
    }

    @Test func missingMessageID() {
        let expected = "InvalidJson: JSON_PARSING_ERROR : Missing Required Field: message_id"
        #expect(AppServerStanzaDecoder.missingMessageIDDescription == expected)
        // The documentation's own example.
        #expect(decode(#"{"random": "text"}"#).stanzaErrorText == expected)
        #expect(decode(#"{"to":"tok","data":{"a":"b"}}"#).stanzaErrorText == expected)
        #expect(decode(#"{"to":"tok","message_id":null}"#).stanzaErrorText == expected)
        #expect(decode(#"{"to":"tok","message_id":""}"#).stanzaErrorText == expected)
        #expect(decode("{}").stanzaErrorText == expected)
    }

    @Test func missingMessageIDOnAckIsBadAck() {
        let ack = decode(#"{"to":"REGID","message_type":"ack"}"#).nack
        #expect(ack?.code == .badAck)
        #expect(ack?.messageID == "")
        #expect(ack?.from == "REGID")
        #expect(decode(#"{"message_type":"nack"}"#).nack?.code == .badAck)
    }

    @Test func missingMessageIDWinsOverOtherErrors() {
        #expect(decode(#"{"time_to_live":-1,"message_type":"control"}"#).stanzaErrorText
            == "InvalidJson: JSON_PARSING_ERROR : Missing Required Field: message_id")
    }

    @Test(arguments: [
        (#"true"#, "true"),
        (#"{"a":1}"#, #"{"a":1}"#),
        (#"["m"]"#, #"["m"]"#),
        (#"1.5"#, "1.5"),
    ])
    func messageIDOfWrongType(raw: String, shown: String) {
        #expect(decode(#"{"to":"tok","message_id":\#(raw)}"#).stanzaErrorText
            == "InvalidJson: JSON_TYPE_ERROR : Field \"message_id\" must be a JSON java.lang.String: \(shown)")
    }

    @Test func integerMessageIDIsAcceptedAsString() {
        #expect(decode(#"{"to":"tok","message_id":42}"#).downstream?.messageID == "42")
        // …and a later NACK carries it as a string.
        #expect(decode(#"{"to":"tok","message_id":42,"time_to_live":-1}"#).nack?.messageID == "42")
    }
}

@Suite("ACK and NACK from the app server")
struct AppServerAckTests {
    @Test func documentedAck() {
        #expect(decode(#"{"to":"REGID","message_id":"m-123","message_type":"ack"}"#)
            == .success(.ack(messageID: "m-123", to: "REGID")))
    }

    @Test func ackWithoutTo() {
        #expect(decode(#"{"message_id":"m-123","message_type":"ack"}"#) == .success(.ack(messageID: "m-123", to: nil)))
        #expect(decode(#"{"message_id":"m-123","message_type":"ack","to":null}"#) == .success(.ack(messageID: "m-123", to: nil)))
        #expect(decode(#"{"message_id":"m-123","message_type":"ack","to":""}"#) == .success(.ack(messageID: "m-123", to: nil)))
    }

    @Test func receiptAckKeepsPrefix() {
        #expect(decode(#"{"message_id":"dr2:m-1","message_type":"ack","to":"gcm.googleapis.com"}"#)
            == .success(.ack(messageID: "dr2:m-1", to: "gcm.googleapis.com")))
        #expect(DeliveryReceipt.originalMessageID(fromAck: "dr2:m-1") == "m-1")
        #expect(DeliveryReceipt.originalMessageID(fromAck: "m-1") == "m-1")
    }

    @Test func ackIgnoresDownstreamFields() {
        // An ACK is not validated as a downstream message.
        #expect(decode(#"{"message_id":"u-1","message_type":"ack","to":"REGID","time_to_live":-1,"data":5}"#)
            == .success(.ack(messageID: "u-1", to: "REGID")))
    }

    @Test func messageTypeIsCaseInsensitive() {
        #expect(decode(#"{"message_id":"u-1","message_type":"ACK"}"#) == .success(.ack(messageID: "u-1", to: nil)))
        #expect(decode(#"{"message_id":"u-1","message_type":"Nack"}"#) == .success(.nack(messageID: "u-1", to: nil)))
    }

    @Test func nackFromAppServerIsDecoded() {
        #expect(decode(#"{"to":"REGID","message_id":"u-9","message_type":"nack","error":"X"}"#)
            == .success(.nack(messageID: "u-9", to: "REGID")))
    }

    @Test func ackWithNonStringMessageIDIsBadAck() {
        let nack = decode(#"{"to":"REGID","message_id":123,"message_type":"ack"}"#).nack
        #expect(nack == Nack(messageID: "123", from: "REGID", code: .badAck,
                             description: "InvalidJson: JSON_TYPE_ERROR : Field \"message_id\" must be a JSON java.lang.String: 123"))
        #expect(decode(#"{"message_id":true,"message_type":"nack"}"#).nack?.code == .badAck)
    }

    @Test func ackWithNonStringToIsBadAck() {
        let nack = decode(#"{"to":{"id":1},"message_id":"u-1","message_type":"ack"}"#).nack
        #expect(nack == Nack(messageID: "u-1", from: nil, code: .badAck,
                             description: #"InvalidJson: JSON_TYPE_ERROR : Field "to" must be a JSON java.lang.String: {"id":1}"#))
    }
}

@Suite("message_type values an app server may not send")
struct MessageTypeTests {
    @Test(arguments: ["control", "receipt", "downstream", "garbage"])
    func otherMessageTypesAreInvalidJSON(type: String) {
        let nack = decode(#"{"to":"tok","message_id":"m-1","message_type":"\#(type)"}"#).nack
        #expect(nack == Nack(messageID: "m-1", from: "tok", code: .invalidJSON,
                             description: "InvalidJson: JSON_TYPE_ERROR : Invalid value (\(type)) for \"message_type\": an app server may only send \"ack\" or \"nack\""))
    }

    @Test func nonStringMessageType() {
        #expect(invalidJSONDescription(#"{"to":"tok","message_id":"m-1","message_type":1}"#)
            == "InvalidJson: JSON_TYPE_ERROR : Invalid value (1) for \"message_type\": an app server may only send \"ack\" or \"nack\"")
    }

    @Test func emptyOrNullMessageTypeMeansDownstream() {
        #expect(decode(#"{"to":"tok","message_id":"m-1","message_type":""}"#).downstream != nil)
        #expect(decode(#"{"to":"tok","message_id":"m-1","message_type":null}"#).downstream != nil)
    }
}

@Suite("Targets: to / condition")
struct TargetTests {
    @Test func neitherToNorCondition() {
        let nack = decode(#"{"message_id":"m-1","data":{"a":"b"}}"#).nack
        #expect(nack == Nack(messageID: "m-1", from: nil, code: .invalidJSON,
                             description: #"InvalidJson: MISSING_REGISTRATION : Missing "to" or "condition" field"#))
    }

    @Test func emptyToCountsAsMissing() {
        #expect(invalidJSONDescription(#"{"to":"","message_id":"m-1"}"#)
            == #"InvalidJson: MISSING_REGISTRATION : Missing "to" or "condition" field"#)
        #expect(invalidJSONDescription(#"{"to":null,"condition":"  ","message_id":"m-1"}"#)
            == #"InvalidJson: MISSING_REGISTRATION : Missing "to" or "condition" field"#)
    }

    @Test func httpStyleRegistrationIDsAreNotATarget() {
        #expect(invalidJSONDescription(#"{"registration_ids":["a","b"],"message_id":"m-1"}"#)
            == #"InvalidJson: MISSING_REGISTRATION : Missing "to" or "condition" field"#)
    }

    @Test func bothToAndCondition() {
        let nack = decode(#"{"to":"tok","condition":"'a' in topics","message_id":"m-1"}"#).nack
        #expect(nack == Nack(messageID: "m-1", from: "tok", code: .invalidJSON,
                             description: #"InvalidJson: INVALID_PARAMETERS : Only one of "to" or "condition" may be given"#))
    }

    @Test func emptyToWithConditionUsesCondition() {
        let message = decode(#"{"to":"","condition":"'a' in topics","message_id":"m-1"}"#).downstream
        #expect(message?.to == nil)
        #expect(message?.condition == "'a' in topics")
    }

    @Test func toOfWrongType() {
        let nack = decode(#"{"to":123,"message_id":"m-1"}"#).nack
        #expect(nack == Nack(messageID: "m-1", from: nil, code: .invalidJSON,
                             description: #"InvalidJson: JSON_TYPE_ERROR : Field "to" must be a JSON java.lang.String: 123"#))
    }

    @Test func conditionOfWrongType() {
        #expect(invalidJSONDescription(#"{"condition":["a"],"message_id":"m-1"}"#)
            == #"InvalidJson: JSON_TYPE_ERROR : Field "condition" must be a JSON java.lang.String: ["a"]"#)
    }

    @Test func registrationTokenIsOpaque() {
        let message = decode(#"{"to":"not a real token!","message_id":"m-1"}"#).downstream
        #expect(message?.target == .registration("not a real token!"))
    }

    @Test func validTopic() {
        let message = decode(#"{"to":"/topics/foo-bar_1.~%20","message_id":"m-1"}"#).downstream
        #expect(message?.to == "/topics/foo-bar_1.~%20")
        #expect(message?.target == .topic("foo-bar_1.~%20"))
    }

    @Test(arguments: ["/topics/", "/topics/a b", "/topics/a/b", "/topics/ünï", "/topics/a+b"])
    func invalidTopic(to: String) {
        let nack = decode(downstreamJSON(to: to)).nack
        #expect(nack == Nack(messageID: "m-1", from: to, code: .invalidJSON,
                             description: "InvalidJson: INVALID_PARAMETERS : Invalid topic name in \"to\": \(to)"))
    }

    @Test func validCondition() throws {
        let message = try #require(decode(#"{"condition":"'a' in topics && ('b' in topics || 'c' in topics)","message_id":"m-1"}"#).downstream)
        #expect(message.to == nil)
        guard case .condition(let condition)? = message.target else {
            Issue.record("expected a condition target")
            return
        }
        #expect(condition.topics == ["a", "b", "c"])
    }

    @Test func invalidConditionSyntax() {
        let nack = decode(#"{"condition":"'a' in","message_id":"m-1"}"#).nack
        #expect(nack == Nack(messageID: "m-1", from: "'a' in", code: .invalidJSON,
                             description: #"InvalidJson: INVALID_PARAMETERS : Invalid "condition" (Expected 'in topics' after 'a'): 'a' in"#))
    }

    @Test func conditionWithTooManyTopics() {
        let condition = "'a' in topics || 'b' in topics || 'c' in topics || 'd' in topics || 'e' in topics || 'f' in topics"
        #expect(invalidJSONDescription(#"{"condition":"\#(condition)","message_id":"m-1"}"#)
            == "InvalidJson: INVALID_PARAMETERS : Invalid \"condition\" (More than 5 topics in condition): \(condition)")
    }

    @Test func nackFromIsTheConditionWhenThereIsNoTo() {
        #expect(decode(#"{"condition":"'a' in topics","message_id":"m-1","time_to_live":-1}"#).nack?.from == "'a' in topics")
    }
}

@Suite("time_to_live")
struct TimeToLiveTests {
    @Test func defaultIsFourWeeks() throws {
        let message = try #require(decode(downstreamJSON()).downstream)
        #expect(message.timeToLive == 2_419_200)
        #expect(message.timeToLiveGiven == false)
        let null = try #require(decode(downstreamJSON(#""time_to_live":null"#)).downstream)
        #expect(null.timeToLiveGiven == false)
    }

    @Test(arguments: [(0, "0"), (600, "600"), (2_419_200, "2419200")])
    func inRangeNumbers(expected: Int, raw: String) throws {
        let message = try #require(decode(downstreamJSON(#""time_to_live":\#(raw)"#)).downstream)
        #expect(message.timeToLive == expected)
        #expect(message.timeToLiveGiven)
    }

    @Test func numericStringsAreAccepted() throws {
        #expect(decode(downstreamJSON(#""time_to_live":"600""#)).downstream?.timeToLive == 600)
        #expect(decode(downstreamJSON(#""time_to_live":" 0 ""#)).downstream?.timeToLive == 0)
        #expect(decode(downstreamJSON(#""time_to_live":"1e3""#)).downstream?.timeToLive == 1000)
    }

    @Test func fractionsAreTruncated() {
        #expect(decode(downstreamJSON(#""time_to_live":1.9"#)).downstream?.timeToLive == 1)
        #expect(decode(downstreamJSON(#""time_to_live":"59.99""#)).downstream?.timeToLive == 59)
        #expect(decode(downstreamJSON(#""time_to_live":6e2"#)).downstream?.timeToLive == 600)
    }

    @Test(arguments: [
        ("-1", "-1"), ("2419201", "2419201"), (#""-5""#, "-5"), ("-1.5", "-1.5"), ("3e6", "3000000"),
        ("1e300", "1e+300"), ("99999999999999999999", "1e+20"),
    ])
    func outOfRange(raw: String, shown: String) {
        let nack = decode(downstreamJSON(#""time_to_live":\#(raw)"#)).nack
        #expect(nack == Nack(messageID: "m-1", from: "tok", code: .invalidJSON,
                             description: "InvalidJson: INVALID_TTL : Invalid value (\(shown)) for \"time_to_live\": must be between 0 and \"2419200\""))
    }

    @Test func documentedTypeError() {
        // Verbatim from Google's NACK example.
        #expect(invalidJSONDescription(downstreamJSON(#""time_to_live":"abc""#))
            == #"InvalidJson: JSON_TYPE_ERROR : Field "time_to_live" must be a JSON java.lang.Number: abc"#)
    }

    @Test(arguments: [(#""""#, ""), ("true", "true"), (#"{"s":1}"#, #"{"s":1}"#), ("[600]", "[600]"), (#""[600]""#, "[600]")])
    func otherTypeErrors(raw: String, shown: String) {
        #expect(invalidJSONDescription(downstreamJSON(#""time_to_live":\#(raw)"#))
            == "InvalidJson: JSON_TYPE_ERROR : Field \"time_to_live\" must be a JSON java.lang.Number: \(shown)")
    }
}

@Suite("Boolean fields")
struct BooleanFieldTests {
    static let fields = ["delay_while_idle", "delivery_receipt_requested", "dry_run", "content_available", "mutable_content"]

    static func value(_ message: DownstreamMessage, _ field: String) -> Bool? {
        switch field {
        case "delay_while_idle": return message.delayWhileIdle
        case "delivery_receipt_requested": return message.deliveryReceiptRequested
        case "dry_run": return message.dryRun
        case "content_available": return message.contentAvailable
        case "mutable_content": return message.mutableContent
        default: return nil
        }
    }

    @Test(arguments: fields)
    func trueAndFalse(field: String) throws {
        let on = try #require(decode(downstreamJSON(#""\#(field)":true"#)).downstream)
        #expect(Self.value(on, field) == true)
        let off = try #require(decode(downstreamJSON(#""\#(field)":false"#)).downstream)
        #expect(Self.value(off, field) == false)
        let string = try #require(decode(downstreamJSON(#""\#(field)":"true""#)).downstream)
        #expect(Self.value(string, field) == true)
    }

    @Test(arguments: fields)
    func absentDefaults(field: String) throws {
        let message = try #require(decode(downstreamJSON()).downstream)
        let expected: Bool? = field == "content_available" || field == "mutable_content" ? nil : false
        #expect(Self.value(message, field) == expected)
    }

    @Test(arguments: fields)
    func typeError(field: String) {
        #expect(invalidJSONDescription(downstreamJSON(#""\#(field)":"yes""#))
            == "InvalidJson: JSON_TYPE_ERROR : Field \"\(field)\" must be a JSON java.lang.Boolean: yes")
        #expect(invalidJSONDescription(downstreamJSON(#""\#(field)":1"#))
            == "InvalidJson: JSON_TYPE_ERROR : Field \"\(field)\" must be a JSON java.lang.Boolean: 1")
    }
}

@Suite("String fields and priority")
struct StringFieldTests {
    @Test func collapseKey() {
        #expect(decode(downstreamJSON(#""collapse_key":"demo""#)).downstream?.collapseKey == "demo")
        #expect(decode(downstreamJSON(#""collapse_key":"""#)).downstream?.collapseKey == nil)
        #expect(invalidJSONDescription(downstreamJSON(#""collapse_key":5"#))
            == #"InvalidJson: JSON_TYPE_ERROR : Field "collapse_key" must be a JSON java.lang.String: 5"#)
    }

    @Test(arguments: [
        (#""high""#, Priority.high), (#""normal""#, .normal), (#""HIGH""#, .high), (#""Normal""#, .normal),
        ("10", .high), ("5", .normal), (#""10""#, .high), (#""5""#, .normal),
    ])
    func acceptedPriorities(raw: String, expected: Priority) {
        #expect(decode(downstreamJSON(#""priority":\#(raw)"#)).downstream?.priority == expected)
    }

    @Test func absentPriorityDefaultsByMessageKind() throws {
        let data = try #require(decode(downstreamJSON(#""data":{"a":"b"}"#)).downstream)
        #expect(data.priority == nil)
        #expect(data.effectivePriority == .normal)
        let notification = try #require(decode(downstreamJSON(#""notification":{"title":"t"}"#)).downstream)
        #expect(notification.priority == nil)
        #expect(notification.effectivePriority == .high)
        let explicit = try #require(decode(downstreamJSON(#""priority":"normal","notification":{"title":"t"}"#)).downstream)
        #expect(explicit.effectivePriority == .normal)
        #expect(decode(downstreamJSON(#""priority":"""#)).downstream?.priority == nil)
    }

    @Test(arguments: [(#""urgent""#, "urgent"), ("7", "7"), ("10.5", "10.5")])
    func invalidPriorityValue(raw: String, shown: String) {
        #expect(invalidJSONDescription(downstreamJSON(#""priority":\#(raw)"#))
            == "InvalidJson: INVALID_PARAMETERS : Invalid value (\(shown)) for \"priority\": must be \"normal\" or \"high\"")
    }

    @Test func priorityOfWrongType() {
        #expect(invalidJSONDescription(downstreamJSON(#""priority":true"#))
            == #"InvalidJson: JSON_TYPE_ERROR : Field "priority" must be a JSON java.lang.String: true"#)
    }
}

@Suite("data and notification")
struct PayloadTests {
    @Test func stringValuesAreKept() {
        #expect(decode(downstreamJSON(#""data":{"hello":"world","empty":"","":"x"}"#)).downstream?.data
            == ["hello": "world", "empty": "", "": "x"])
    }

    @Test func nonStringValuesBecomeJSONText() {
        let data = decode(downstreamJSON(#""data":{"n":1,"f":1.5,"t":true,"z":null,"o":{"b":1,"a":[1,"x"]},"a":[],"big":1e21}"#)).downstream?.data
        #expect(data == ["n": "1", "f": "1.5", "t": "true", "z": "null", "o": #"{"a":[1,"x"],"b":1}"#, "a": "[]", "big": "1e+21"])
    }

    @Test func absentAndNull() {
        let message = decode(downstreamJSON(#""data":null,"notification":null"#)).downstream
        #expect(message != nil)
        #expect(message?.data == nil)
        #expect(message?.notification == nil)
    }

    @Test func emptyArrayCountsAsEmptyObject() {
        let message = decode(downstreamJSON(#""data":[],"notification":[]"#)).downstream
        #expect(message?.data == [:])
        #expect(message?.notification == .object([:]))
    }

    @Test(arguments: [(#""x""#, "x"), ("[1]", "[1]"), ("5", "5"), ("true", "true")])
    func dataMustBeAnObject(raw: String, shown: String) {
        #expect(invalidJSONDescription(downstreamJSON(#""data":\#(raw)"#))
            == "InvalidJson: JSON_TYPE_ERROR : Field \"data\" must be a JSON java.lang.Object: \(shown)")
    }

    @Test func notificationMustBeAnObject() {
        #expect(invalidJSONDescription(downstreamJSON(#""notification":"hi""#))
            == #"InvalidJson: JSON_TYPE_ERROR : Field "notification" must be a JSON java.lang.Object: hi"#)
    }

    @Test func notificationIsKeptAsSent() {
        let message = decode(downstreamJSON(#""notification":{"title":"T","body_loc_args":["a",1],"badge":3}"#)).downstream
        #expect(message?.notification == ["title": "T", "body_loc_args": ["a", 1], "badge": 3])
    }

    @Test(arguments: ["from", "message_type", "google", "google.x", "googlefoo", "google.c.a.e", "gcm.notification.title", "gcm.notification.e"])
    func reservedDataKeys(key: String) {
        let nack = decode(downstreamJSON(#""data":{"ok":"1","\#(key)":"v"}"#)).nack
        #expect(nack == Nack(messageID: "m-1", from: "tok", code: .invalidJSON,
                             description: "InvalidJson: INVALID_DATA_KEY : Invalid data key \"\(key)\": keys \"from\", \"message_type\" and keys starting with \"google\" or \"gcm.notification.\" are reserved"))
    }

    @Test(arguments: ["fromage", "Google", "GOOGLE.x", "my.google", "gcm.notification", "gcm.n.e", "collapse_key", "message_id", "to"])
    func allowedDataKeys(key: String) {
        #expect(decode(downstreamJSON(#""data":{"\#(key)":"v"}"#)).downstream?.data == [key: "v"])
    }

    @Test func reservedKeysAreNotCheckedInNotification() {
        #expect(decode(downstreamJSON(#""notification":{"from":"x"}"#)).downstream != nil)
    }
}

@Suite("4096-byte payload limit")
struct PayloadSizeTests {
    /// One data entry whose key + value is `bytes` long.
    static func data(bytes: Int) -> String {
        #""data":{"k":"\#(String(repeating: "v", count: bytes - 1))"}"#
    }

    @Test func exactly4096BytesIsAccepted() throws {
        let message = try #require(decode(downstreamJSON(Self.data(bytes: 4096))).downstream)
        #expect(message.dataBytes == 4096)
    }

    @Test func bytes4097IsTooBig() {
        let nack = decode(downstreamJSON(Self.data(bytes: 4097))).nack
        #expect(nack == Nack(messageID: "m-1", from: "tok", code: .invalidJSON,
                             description: "InvalidJson: MESSAGE_TOO_BIG : Message too big: payload is 4097 bytes, the limit is 4096"))
    }

    @Test func keysCountAndBytesAreUTF8() throws {
        // "é" is 2 bytes, "😀" is 4: 2 + 1 + 4 * 1023 + 1 = 4096.
        let value = String(repeating: "😀", count: 1023) + "x"
        let ok = try #require(decode(downstreamJSON(#""data":{"é":"\#(value)","a":""}"#)).downstream)
        #expect(ok.dataBytes == 4096)
        #expect(invalidJSONDescription(downstreamJSON(#""data":{"é":"\#(value)","ab":""}"#))
            == "InvalidJson: MESSAGE_TOO_BIG : Message too big: payload is 4097 bytes, the limit is 4096")
    }

    @Test func stringifiedValuesAreCounted() throws {
        // 4093 + "n" + "123" = 4097
        let filler = #""f":"\#(String(repeating: "x", count: 4092))""#
        #expect(decode(downstreamJSON(#""data":{\#(filler),"n":12}"#)).downstream?.dataBytes == 4096)
        #expect(invalidJSONDescription(downstreamJSON(#""data":{\#(filler),"n":123}"#)).hasPrefix("InvalidJson: MESSAGE_TOO_BIG"))
    }

    @Test func notificationCountsTowardTheLimit() throws {
        // data 4000 + "title" (5) + 91 = 4096
        let data = Self.data(bytes: 4000)
        let fits = #""notification":{"title":"\#(String(repeating: "t", count: 91))"}"#
        let message = try #require(decode(downstreamJSON(data + "," + fits)).downstream)
        #expect(message.dataBytes == 4096)
        let tooBig = #""notification":{"title":"\#(String(repeating: "t", count: 92))"}"#
        #expect(invalidJSONDescription(downstreamJSON(data + "," + tooBig))
            == "InvalidJson: MESSAGE_TOO_BIG : Message too big: payload is 4097 bytes, the limit is 4096")
    }

    @Test func notificationNonStringValuesCountAsJSON() {
        // "body_loc_args" (13) + ["a","b"] (9)
        #expect(decode(downstreamJSON(#""notification":{"body_loc_args":["a","b"]}"#)).downstream?.dataBytes == 22)
    }

    @Test func payloadBytesHelper() {
        #expect(DownstreamMessage.payloadBytes(data: ["ab": "cde"], notification: ["t": "xy", "n": 10]) == 11)
        #expect(DownstreamMessage(messageID: "m", data: ["ab": "cde"]).dataBytes == 5)
    }
}

@Suite("Whole messages")
struct WholeMessageTests {
    @Test func everyFieldIsDecoded() throws {
        let text = #"""
        {"to":"tok-1","message_id":"m-1366082849205","collapse_key":"score","priority":"high",
         "content_available":true,"mutable_content":false,"time_to_live":600,"delay_while_idle":true,
         "delivery_receipt_requested":true,"dry_run":true,"data":{"score":"5x1","time":"15:10"},
         "notification":{"title":"Portugal vs. Denmark","body":"great match!","icon":"myicon"}}
        """#
        let message = try #require(decode(text).downstream)
        var expected = DownstreamMessage(
            to: "tok-1", messageID: "m-1366082849205", collapseKey: "score", priority: .high,
            contentAvailable: true, mutableContent: false, timeToLive: 600, delayWhileIdle: true,
            deliveryReceiptRequested: true, dryRun: true, data: ["score": "5x1", "time": "15:10"],
            notification: ["title": "Portugal vs. Denmark", "body": "great match!", "icon": "myicon"])
        expected.dataBytes = 5 + 3 + 4 + 5 + 5 + 20 + 4 + 12 + 4 + 6
        #expect(message == expected)
        #expect(message.dataBytes == 68)
    }

    @Test func leadingAndTrailingWhitespaceAndNewlines() {
        let padded = "\n    \t" + downstreamJSON(#""data":{"a":"b"}"#) + "\r\n  \n"
        #expect(decode(padded).downstream?.data == ["a": "b"])
    }

    @Test func prettyPrintedJSON() {
        let text = """

          {
            "to" : "tok",
            "message_id" : "m-1",
            "data" : {
              "hello" : "world"
            }
          }

        """
        #expect(decode(text).downstream?.data == ["hello": "world"])
    }

    @Test func phpJSONForceObject() throws {
        // FCMStream: json_encode($message, JSON_FORCE_OBJECT) between newlines; "/" escaped as "\/",
        // non-ASCII as \u escapes, lists as {"0":…} objects, time_to_live and priority always present.
        let text = "\n    " + #"{"to":"\/topics\/news","message_id":"php-1","priority":"normal","time_to_live":2419200,"data":{"0":"first","list":{"0":"x","1":"y"},"caf\u00e9":"\u00e9t\u00e9"},"registration_ids":{"0":"tok"}}"# + "\n"
        let message = try #require(decode(text).downstream)
        #expect(message.to == "/topics/news")
        #expect(message.target == .topic("news"))
        #expect(message.priority == .normal)
        #expect(message.timeToLive == 2_419_200)
        #expect(message.timeToLiveGiven)
        #expect(message.data == ["0": "first", "list": #"{"0":"x","1":"y"}"#, "café": "été"])
    }

    @Test func unknownFieldsAreIgnored() {
        let text = downstreamJSON(#""restricted_package_name":"com.x","fcm_options":{"analytics_label":"l"},"foo":[1,{"bar":null}]"#)
        #expect(decode(text).downstream?.messageID == "m-1")
    }

    @Test func checksRunInDocumentedOrder() {
        // Type errors before range errors, range errors before data keys, data keys before size.
        #expect(invalidJSONDescription(downstreamJSON(#""time_to_live":-1,"dry_run":"x""#)).hasPrefix("InvalidJson: JSON_TYPE_ERROR"))
        #expect(invalidJSONDescription(downstreamJSON(#""time_to_live":-1,"priority":"x""#)).hasPrefix("InvalidJson: INVALID_TTL"))
        #expect(invalidJSONDescription(downstreamJSON(#""data":{"from":"\#(String(repeating: "x", count: 5000))"}"#)).hasPrefix("InvalidJson: INVALID_DATA_KEY"))
        #expect(invalidJSONDescription(#"{"message_id":"m","time_to_live":-1}"#).hasPrefix("InvalidJson: MISSING_REGISTRATION"))
    }

    @Test func documentedNackRoundTrip() {
        // Google's example NACK, produced from the matching bad request.
        let nack = decode(#"{"to":"APA91bHFOtaQGSwupt5l1og","message_id":"msgId1","time_to_live":"abc"}"#).nack
        #expect(nack.map(OutgoingJSON.nack)
            == #"{"message_type":"nack","message_id":"msgId1","from":"APA91bHFOtaQGSwupt5l1og","error":"INVALID_JSON","error_description":"InvalidJson: JSON_TYPE_ERROR : Field \"time_to_live\" must be a JSON java.lang.Number: abc"}"#)
    }

    @Test func encodedJSONRoundTrips() throws {
        let texts = [
            downstreamJSON(),
            #"{"condition":"'a' in topics","message_id":"c-1","priority":"HIGH","time_to_live":"60","data":{"n":5,"s":"x\"y"},"notification":{"title":"t","b":[1]},"dry_run":true,"content_available":false,"mutable_content":true,"collapse_key":"k","delay_while_idle":true,"delivery_receipt_requested":true}"#,
            #"{"to":"/topics/x","message_id":"t-1","data":[],"time_to_live":0}"#,
        ]
        for text in texts {
            let message = try #require(decode(text).downstream)
            #expect(decode(message.encodedJSON()).downstream == message, "\(text)")
            #expect(AppServerJSON.downstream(message) == message.encodedJSON())
        }
        let message = try #require(decode(#"{"to":"t","message_id":"m","priority":"high","time_to_live":60,"data":{"b":"2","a":"1"}}"#).downstream)
        #expect(message.encodedJSON() == #"{"to":"t","message_id":"m","priority":"high","time_to_live":60,"data":{"a":"1","b":"2"}}"#)
    }
}

@Suite("Validation errors for other front ends")
struct ValidationErrorMappingTests {
    @Test func legacyHTTPErrorNames() {
        #expect(DownstreamValidationError.missingRegistration.legacyHTTPError == "MissingRegistration")
        #expect(DownstreamValidationError.invalidTimeToLive(value: "-1").legacyHTTPError == "InvalidTtl")
        #expect(DownstreamValidationError.invalidDataKey("from").legacyHTTPError == "InvalidDataKey")
        #expect(DownstreamValidationError.messageTooBig(bytes: 5000).legacyHTTPError == "MessageTooBig")
        #expect(DownstreamValidationError.invalidPriority(value: "x").legacyHTTPError == "InvalidParameters")
        #expect(DownstreamValidationError.invalidTopic("/topics/ ").legacyHTTPError == "InvalidParameters")
        #expect(DownstreamValidationError.conflictingTargets.legacyHTTPError == "InvalidParameters")
        #expect(DownstreamValidationError.fieldType(field: "x", expected: .number, value: "y").legacyHTTPError == nil)
    }

    @Test func validateWorksWithoutTheXMPPEnvelope() {
        let result = DownstreamMessage.validate(["to": "tok", "time_to_live": "abc"], messageID: "http-1")
        #expect(result == .failure(.fieldType(field: "time_to_live", expected: .number, value: "abc")))
        let ok = DownstreamMessage.validate(["to": "tok", "data": ["a": 1]], messageID: "http-2")
        #expect((try? ok.get())?.data == ["a": "1"])
    }
}
