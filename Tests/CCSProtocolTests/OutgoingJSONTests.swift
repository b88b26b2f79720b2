import Testing
@testable import CCSProtocol
import PushDomain

@Suite("Outgoing JSON (CCS → app server)")
struct OutgoingJSONTests {
    @Test func ackMatchesDocumentation() {
        #expect(OutgoingJSON.ack(messageID: "m-1366082849205", from: "REGID")
            == #"{"from":"REGID","message_id":"m-1366082849205","message_type":"ack"}"#)
    }

    @Test func ackWithoutFromAndWithCanonicalID() {
        #expect(OutgoingJSON.ack(messageID: "m-1", from: nil) == #"{"message_id":"m-1","message_type":"ack"}"#)
        #expect(OutgoingJSON.ack(messageID: "m-1", from: "old", registrationID: "new")
            == #"{"from":"old","message_id":"m-1","message_type":"ack","registration_id":"new"}"#)
    }

    @Test func nackMatchesDocumentation() {
        let nack = Nack(messageID: "msgId1", from: "SomeInvalidRegistrationId", code: .badRegistration,
                        description: "Invalid token on 'to' field: SomeInvalidRegistrationId")
        #expect(OutgoingJSON.nack(nack)
            == #"{"message_type":"nack","message_id":"msgId1","from":"SomeInvalidRegistrationId","error":"BAD_REGISTRATION","error_description":"Invalid token on 'to' field: SomeInvalidRegistrationId"}"#)
        #expect(Nack.badRegistration(messageID: "msgId1", token: "SomeInvalidRegistrationId") == nack)
    }

    @Test func nackRateExceededMatchesDocumentation() {
        let nack = Nack(messageID: "msgId1", from: "REGID", code: .deviceMessageRateExceeded)
        #expect(OutgoingJSON.nack(nack)
            == #"{"message_type":"nack","message_id":"msgId1","from":"REGID","error":"DEVICE_MESSAGE_RATE_EXCEEDED","error_description":"Downstream message rate exceeded for this registration id"}"#)
    }

    @Test func nackWithoutFrom() {
        let nack = Nack(messageID: "m-1", from: nil, code: .connectionDraining)
        #expect(OutgoingJSON.nack(nack)
            == #"{"message_type":"nack","message_id":"m-1","error":"CONNECTION_DRAINING","error_description":"Connection is draining; send on a new connection"}"#)
    }

    @Test func nackCodesAreTheDocumentedStrings() {
        #expect(NackCode.allCases.map(\.rawValue) == [
            "BAD_ACK", "BAD_REGISTRATION", "CONNECTION_DRAINING", "DEVICE_UNREGISTERED", "INTERNAL_SERVER_ERROR",
            "INVALID_JSON", "DEVICE_MESSAGE_RATE_EXCEEDED", "SERVICE_UNAVAILABLE", "TOPICS_MESSAGE_RATE_EXCEEDED",
            "QUOTA_EXCEEDED",
        ])
        for code in NackCode.allCases {
            #expect(!code.defaultDescription.isEmpty)
        }
        #expect(NackCode.serviceUnavailable.isRetryable)
        #expect(NackCode.connectionDraining.isRetryable)
        #expect(!NackCode.invalidJSON.isRetryable)
        #expect(!NackCode.badRegistration.isRetryable)
    }

    @Test func connectionDraining() {
        #expect(OutgoingJSON.connectionDraining == #"{"message_type":"control","control_type":"CONNECTION_DRAINING"}"#)
    }

    @Test func deviceGroupAckMatchesDocumentation() {
        #expect(OutgoingJSON.deviceGroupAck(messageID: "m-1366082849205", from: "aUniqueKey", success: 3, failure: 0)
            == #"{"from":"aUniqueKey","message_type":"ack","success":3,"failure":0,"message_id":"m-1366082849205"}"#)
        #expect(OutgoingJSON.deviceGroupAck(messageID: "m-1", from: "aUniqueKey", success: 1, failure: 2,
                                            failedRegistrationIDs: ["regId1", "regId2"])
            == #"{"from":"aUniqueKey","message_type":"ack","success":1,"failure":2,"failed_registration_ids":["regId1","regId2"],"message_id":"m-1"}"#)
    }

    @Test func valuesAreJSONEscapedButNotXMLEscaped() {
        #expect(OutgoingJSON.ack(messageID: "a\"b\\c</gcm>&", from: "x/y\n")
            == #"{"from":"x/y\n","message_id":"a\"b\\c</gcm>&","message_type":"ack"}"#)
    }

    @Test func appServerAckMatchesDocumentation() {
        #expect(AppServerJSON.ack(messageID: "m-123", to: "REGID") == #"{"to":"REGID","message_id":"m-123","message_type":"ack"}"#)
        #expect(decode(AppServerJSON.ack(messageID: "m-123", to: "REGID")) == .success(.ack(messageID: "m-123", to: "REGID")))
    }
}

@Suite("Decoding what CCS sends")
struct ConnectionServerMessageTests {
    @Test func decodesEveryBuilderOutput() {
        #expect(ConnectionServerMessage.decode(OutgoingJSON.ack(messageID: "m-1", from: "t", registrationID: "n"))
            == .ack(messageID: "m-1", from: "t", registrationID: "n"))
        let nack = Nack(messageID: "m-2", from: "t", code: .serviceUnavailable, description: "d")
        #expect(ConnectionServerMessage.decode(OutgoingJSON.nack(nack)) == .nack(nack))
        #expect(ConnectionServerMessage.decode(OutgoingJSON.connectionDraining) == .control("CONNECTION_DRAINING"))
        // Upstream messages and receipts are stored bodies, written by StoreModel's StoredJSON
        // (Tests/SQLiteStoreTests/StoredJSONTests.swift pins these bytes).
        let upstream = UpstreamMessage(category: "c", data: ["k": "v"], messageID: "u-1", from: "tok", timeToLive: 60)
        #expect(ConnectionServerMessage.decode(#"{"category":"c","data":{"k":"v"},"message_id":"u-1","from":"tok","time_to_live":60}"#)
            == .upstream(upstream))
        #expect(ConnectionServerMessage.decode(#"{"category":"c","data":{"message_status":"MESSAGE_SENT_TO_DEVICE","original_message_id":"m-3","device_registration_id":"tok","message_sent_timestamp":"42"},"message_id":"dr2:m-3","message_type":"receipt","from":"gcm.googleapis.com"}"#)
            == .receipt(DeliveryReceipt(category: "c", messageID: "dr2:m-3", messageStatus: "MESSAGE_SENT_TO_DEVICE",
                                        originalMessageID: "m-3", deviceRegistrationID: "tok", sentTimestampMillis: 42)))
    }

    @Test func decodesDocumentationLayouts() {
        let padded = """

          {"category":"com.example.yourapp","data":{"hello":"world"},"message_id":"m-123","from":"REGID"}

        """
        #expect(ConnectionServerMessage.decode(padded)
            == .upstream(UpstreamMessage(category: "com.example.yourapp", data: ["hello": "world"], messageID: "m-123", from: "REGID")))
    }

    @Test func rejectsOtherShapes() {
        #expect(ConnectionServerMessage.decode("nope") == nil)
        #expect(ConnectionServerMessage.decode(#"{"message_type":"ack"}"#) == nil)
        #expect(ConnectionServerMessage.decode(#"{"message_type":"nack","message_id":"m","error":"NEW_CODE"}"#) == nil)
        #expect(ConnectionServerMessage.decode(#"{"message_type":"weird","message_id":"m"}"#) == nil)
        #expect(ConnectionServerMessage.decode(#"{"message_id":"m","from":"x"}"#) == nil)
    }
}
