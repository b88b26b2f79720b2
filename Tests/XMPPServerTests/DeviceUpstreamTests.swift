import PushDomain
import Testing
@testable import XMPPServer

/// The device channel reads a device's upstream message and writes the engine's answer in CCS JSON
/// (moved out of the engine; the answers are byte for byte what `Engine.upstream` used to render).
@Suite struct DeviceUpstreamTests {
    @Test func aDevicesUpstreamMessageBecomesTheEnginesRequest() {
        let object: [String: JSONValue] = ["message_id": "u1", "to": "111@gcm.googleapis.com", "time_to_live": 60,
                                           "data": ["k": "v", "n": 5, "nested": ["x": "y"]]]
        #expect(DeviceUpstream.request(from: object)
            == .success(UpstreamRequest(messageID: "u1", to: "111@gcm.googleapis.com", timeToLive: 60, data: ["k": "v"])))
        // A numeric id is taken as its decimal text; a null time to live is none.
        #expect(DeviceUpstream.request(from: ["message_id": 42, "to": "111@gcm.googleapis.com", "time_to_live": nil])
            == .success(UpstreamRequest(messageID: "42", to: "111@gcm.googleapis.com")))
    }

    @Test func whatTheDeviceChannelRefusesBeforeTheEngine() {
        #expect(DeviceUpstream.request(from: ["to": "111@gcm.googleapis.com"])
            == .failure(.init(messageID: "", error: .missingMessageID)))
        #expect(DeviceUpstream.request(from: ["message_id": "", "to": "111@gcm.googleapis.com"])
            == .failure(.init(messageID: "", error: .missingMessageID)))
        #expect(DeviceUpstream.request(from: ["message_id": "u2"]) == .failure(.init(messageID: "u2", error: .missingTo)))
        #expect(DeviceUpstream.request(from: ["message_id": "u3", "to": 7]) == .failure(.init(messageID: "u3", error: .missingTo)))
        for ttl: JSONValue in [-1, 2_419_201, "60", 1.5] {
            #expect(DeviceUpstream.request(from: ["message_id": "u4", "to": "111@gcm.googleapis.com", "time_to_live": ttl])
                == .failure(.init(messageID: "u4", error: .invalidTTL)))
        }
        #expect(DeviceUpstream.request(from: ["message_id": "u5", "to": "111@gcm.googleapis.com", "time_to_live": 2_419_200])
            == .success(UpstreamRequest(messageID: "u5", to: "111@gcm.googleapis.com", timeToLive: 2_419_200)))
    }

    @Test func theAnswersAreTheJSONTheDeviceReceived() {
        #expect(DeviceUpstream.answer(.sent(messageID: "u1")) == #"{"message_id":"u1","message_type":"sent"}"#)
        #expect(DeviceUpstream.answer(.sendError(messageID: "x", error: .invalidSender))
            == #"{"error":"INVALID_SENDER","message_id":"x","message_type":"send_error"}"#)
        #expect(DeviceUpstream.answer(.sendError(messageID: "", error: .missingMessageID))
            == #"{"error":"MISSING_MESSAGE_ID","message_id":"","message_type":"send_error"}"#)
        #expect(DeviceUpstream.answer(.sendError(messageID: "a\"b", error: .ttlExceeded))
            == #"{"error":"TTL_EXCEEDED","message_id":"a\"b","message_type":"send_error"}"#)
    }
}
