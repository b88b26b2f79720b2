import Crypto
import PushDomain
import Testing
@testable import APNsProviderAPI

@Suite struct ProviderRequestValidatorTests {
    static let token = String(repeating: "ab", count: 32)
    let key = ProviderKey(keyID: "KEY0000001", teamID: "TEAM000001", topics: [], environment: .both,
                          publicKey: P256.Signing.PrivateKey().publicKey)

    func check(_ headers: [(String, String)], body: String = #"{"aps":{"alert":"hi"}}"#,
               authorization: ProviderConnection.Authorization? = nil) -> Result<ProviderNotification, ProviderReason> {
        let request = ProviderRequest(method: "POST", path: "/3/device/" + Self.token,
                                      headers: headers.map { (name: $0.0, value: $0.1) }, body: Array(body.utf8))
        return ProviderRequestValidator().validate(request, deviceToken: Self.token,
                                                   authorization: authorization ?? .token(key), makeID: { "MADE" })
    }

    func reason(_ headers: [(String, String)], body: String = #"{"aps":{"alert":"hi"}}"#,
                authorization: ProviderConnection.Authorization? = nil) -> ProviderReason? {
        if case .failure(let r) = check(headers, body: body, authorization: authorization) { return r }
        return nil
    }

    @Test func paths() {
        func route(_ method: String, _ path: String) -> Result<String, ProviderReason> {
            ProviderRequest(method: method, path: path, headers: [], body: []).deviceToken()
        }
        #expect(route("GET", "/3/device/" + Self.token) == .failure(.methodNotAllowed))
        #expect(route("POST", "/2/device/" + Self.token) == .failure(.badPath))
        #expect(route("POST", "/3/device/") == .failure(.missingDeviceToken))
        #expect(route("POST", "/3/device/xyz") == .failure(.badDeviceToken))
        #expect(route("POST", "/3/device/" + Self.token.uppercased()) == .success(Self.token))
    }

    @Test func aGoodRequestAndItsDefaults() throws {
        let n = try check([("apns-topic", "com.example.app")]).get()
        #expect(n.apnsID == "MADE" && n.pushType == .alert && n.priority == 10 && n.expiration == nil)
        #expect(n.bundleID == "com.example.app" && n.topic == "com.example.app")
        let voip = try check([("apns-topic", "com.example.app.voip"), ("apns-push-type", "voip"),
                              ("apns-expiration", "0"), ("apns-priority", "5")]).get()
        #expect(voip.bundleID == "com.example.app" && voip.expiration == 0 && voip.priority == 5)
    }

    @Test func theTablesReasons() {
        let topic = ("apns-topic", "com.example.app")
        #expect(reason([topic, ("apns-collapse-id", String(repeating: "c", count: 65))]) == .badCollapseId)
        #expect(reason([topic, ("apns-collapse-id", String(repeating: "c", count: 64))]) == nil)
        #expect(reason([topic, ("apns-expiration", "-1")]) == .badExpirationDate)
        #expect(reason([topic, ("apns-expiration", "99999999999999999999")]) == .badExpirationDate)
        #expect(reason([topic, ("apns-id", "123")]) == .badMessageId)
        #expect(reason([topic, ("apns-priority", "0")]) == .badPriority)
        #expect(reason([("apns-topic", "")]) == .badTopic)
        #expect(reason([topic, topic]) == .duplicateHeaders)
        #expect(reason([topic, ("apns-push-type", "Alert")]) == .invalidPushType)
        #expect(reason([]) == .missingTopic)
        #expect(reason([topic], body: "") == .payloadEmpty)
        #expect(reason([topic], body: "[1]") == .payloadEmpty)
        #expect(reason([topic], body: #"{"aps":{"alert":""#+String(repeating: "x", count: 4096)+#""}}"#) == .payloadTooLarge)
        let limited = ProviderKey(keyID: "KEY0000001", teamID: "TEAM000001", topics: ["com.example.other"],
                                  environment: .both, publicKey: key.publicKey)
        #expect(reason([topic], authorization: .token(limited)) == .topicDisallowed)
    }

    @Test func pushTypesAndTheirTopics() {
        for type in PushType.allCases {
            let topic = "com.example.app" + (type.topicSuffix ?? "")
            let body = type == .background ? #"{"aps":{"content-available":1}}"# : #"{"aps":{}}"#
            #expect(reason([("apns-topic", topic), ("apns-push-type", type.rawValue)], body: body) == nil, "\(type)")
            if type.topicSuffix != nil {
                #expect(reason([("apns-topic", "com.example.app"), ("apns-push-type", type.rawValue)], body: body)
                        == .badTopic, "\(type)")
            }
        }
        #expect(PushType.bundleID(ofTopic: "a.b.voip-ptt") == ("a.b", ".voip-ptt"))
        #expect(PushType.bundleID(ofTopic: ".voip") == (".voip", nil))
    }

    @Test func backgroundRules() {
        let headers = [("apns-topic", "com.example.app"), ("apns-push-type", "background")]
        #expect(reason(headers, body: #"{"aps":{"content-available":1}}"#) == nil)  // priority 5 by default
        #expect(reason(headers + [("apns-priority", "10")], body: #"{"aps":{"content-available":1}}"#) == .badPriority)
        #expect(reason(headers, body: #"{"aps":{"content-available":1,"alert":"x"}}"#) == .invalidPushType)
        #expect(reason(headers, body: #"{"aps":{}}"#) == .invalidPushType)
    }

    @Test func certificatesNameTheirTopicAndCannotUpdateLiveActivities() throws {
        let cert = ProviderConnection.Authorization.certificate(bundleID: "com.example.app")
        #expect(try check([], authorization: cert).get().topic == "com.example.app")
        #expect(reason([("apns-topic", "com.example.other")], authorization: cert) == .badTopic)
        #expect(reason([("apns-topic", "com.example.app.push-type.liveactivity"), ("apns-push-type", "liveactivity")],
                       authorization: cert) == .forbidden)
        #expect(reason([("apns-topic", "com.example.app.push-type.liveactivity"), ("apns-push-type", "liveactivity")])
                == nil)
    }

    @Test func answers() {
        #expect(ProviderAnswer.refused(.unregistered, apnsID: "X", timestampMillis: 1_700_000_000_000).body
                == #"{"reason":"Unregistered","timestamp":1700000000000}"#)
        #expect(ProviderAnswer.refused(.badTopic, apnsID: nil, timestampMillis: 5).body == #"{"reason":"BadTopic"}"#)
        #expect(ProviderReason.allCases.allSatisfy { [400, 403, 404, 405, 410, 413, 429, 500, 503].contains($0.status) })
    }
}
