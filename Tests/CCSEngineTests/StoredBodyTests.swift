import CCSEngine
import PushDomain
import StoreModel
import Testing

/// The engine builds what it stores for an app server (upstream messages, receipts) and for a device
/// (the `send_error` notice) from domain values through StoreModel's `StoredJSON`, no longer through the
/// CCS codec: the stored bytes, which the XMPP roles send as they are, must be the ones it wrote before.
@Suite struct StoredBodyTests {
    @Test func anUpstreamMessageIsStoredAndSentAsCCSWroteIt() async throws {
        let h = try Harness()
        let d = try await h.register()
        let server = h.appServer(id: "c1")
        #expect(await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": "u1", "time_to_live": 60,
                                           "data": ["k": "v", "n": 5]]) == .sent(messageID: "u1"))
        await h.settle()
        let expected = #"{"category":"com.example.app","data":{"k":"v"},"message_id":"u1","from":"\#(d.token)","time_to_live":60}"#
        #expect(try #require(server.sent.withLock { $0.first }).json == expected)
    }

    @Test func aReceiptIsStoredAndSentAsCCSWroteIt() async throws {
        let h = try Harness()
        let d = try await h.register()
        let server = h.appServer(id: "c1")
        let device = await h.connect(d.token)
        _ = await h.send(data("m1", to: d.token) { $0.deliveryReceiptRequested = true })
        h.engine.deviceAcknowledged(token: d.token, deviceMessageID: device.ids[0])
        await h.settle()
        let expected = #"{"category":"com.example.app","data":{"message_status":"MESSAGE_SENT_TO_DEVICE","original_message_id":"m1","device_registration_id":"\#(d.token)","message_sent_timestamp":"1700000000000"},"message_id":"dr2:m1","message_type":"receipt","from":"gcm.googleapis.com"}"#
        #expect(try #require(server.sent.withLock { $0.first }).json == expected)
        #expect(try h.engine.store.loadOutbound().map(\.json) == [expected])
    }

    @Test func theSendErrorNoticeOfAnExpiredUpstreamMessageIsStoredAsBefore() async throws {
        let h = try Harness()
        let d = try await h.register()
        let device = await h.connect(d.token)
        _ = await h.upstream(d.token, ["to": "111@gcm.googleapis.com", "message_id": "u1", "time_to_live": 10])
        _ = try await h.engine.advanceClock(byMillis: 10_000)
        await h.settle()
        #expect(device.delivered.withLock { $0.map(\.message.payload) }
            == [#"{"error":"TTL_EXCEEDED","message_id":"u1","message_type":"send_error"}"#])
    }
}
