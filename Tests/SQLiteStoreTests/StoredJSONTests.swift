import PushDomain
import StoreModel
import Testing

/// The stored bodies of outbound messages and of the `send_error` notice: a stored format (older data
/// directories and exports hold these bytes), so each is pinned to what the code before the move wrote.
@Suite struct StoredJSONTests {
    @Test func anUpstreamMessageIsGooglesDocumentedLayout() {
        #expect(StoredJSON.upstream(UpstreamMessage(category: "com.example.yourapp", data: ["hello": "world"],
                                                    messageID: "m-123", from: "REGID"))
            == #"{"category":"com.example.yourapp","data":{"hello":"world"},"message_id":"m-123","from":"REGID"}"#)
        #expect(StoredJSON.upstream(UpstreamMessage(category: "com.example.myapplication", data: ["message": "hi", "a": "1"],
                                                    messageID: "000001", from: "tok", timeToLive: 86400))
            == #"{"category":"com.example.myapplication","data":{"a":"1","message":"hi"},"message_id":"000001","from":"tok","time_to_live":86400}"#)
    }

    @Test func anUpstreamMessageToADeviceGroupNamesTheKeyAndTheGroup() {
        #expect(StoredJSON.upstream(UpstreamMessage(category: "app", data: ["k": "v"], messageID: "u1", from: "tok",
                                                    timeToLive: 0, group: UpstreamGroup(key: "APA91bKEY", name: "team")))
            == #"{"category":"app","data":{"k":"v"},"message_id":"u1","from":"tok","time_to_live":0,"to":"APA91bKEY","notification_key_name":"team"}"#)
    }

    @Test func aReceiptIsGooglesDocumentedLayout() {
        #expect(StoredJSON.receipt(.sentToDevice(category: "com.example.yourapp", originalMessageID: "m-1366082849205",
                                                 deviceRegistrationID: "REGISTRATION_ID", sentTimestampMillis: 1_366_082_849_205))
            == #"{"category":"com.example.yourapp","data":{"message_status":"MESSAGE_SENT_TO_DEVICE","original_message_id":"m-1366082849205","device_registration_id":"REGISTRATION_ID","message_sent_timestamp":"1366082849205"},"message_id":"dr2:m-1366082849205","message_type":"receipt","from":"gcm.googleapis.com"}"#)
        #expect(StoredJSON.receipt(.sentToDevice(category: nil, originalMessageID: "m", deviceRegistrationID: "d", sentTimestampMillis: 0))
            == #"{"data":{"message_status":"MESSAGE_SENT_TO_DEVICE","original_message_id":"m","device_registration_id":"d","message_sent_timestamp":"0"},"message_id":"dr2:m","message_type":"receipt","from":"gcm.googleapis.com"}"#)
    }

    @Test func theSendErrorNoticeIsTheDeviceChannelsAnswer() {
        #expect(StoredJSON.sendError(messageID: "u1", error: .ttlExceeded)
            == #"{"error":"TTL_EXCEEDED","message_id":"u1","message_type":"send_error"}"#)
        #expect(StoredJSON.sendError(messageID: "u2", error: .tooManyMessages)
            == #"{"error":"TOO_MANY_MESSAGES","message_id":"u2","message_type":"send_error"}"#)
    }
}
