import NIOCore
import PushDomain
import Testing
@testable import APNsGateway

@Suite struct FrameDecoderTests {
    func decodeAll(_ chunks: [[UInt8]], limit: Int = 2048) -> [APNsFrameDecoder.Outcome] {
        var decoder = APNsFrameDecoder(payloadLimit: limit)
        var out: [APNsFrameDecoder.Outcome] = []
        for chunk in chunks {
            decoder.append(Frames.buffer(chunk))
            while let o = decoder.next() {
                out.append(o)
                if case .rejected = o { return out }
            }
        }
        return out
    }

    func only(_ bytes: [UInt8], limit: Int = 2048) -> APNsFrameDecoder.Outcome? {
        let all = decodeAll([bytes], limit: limit)
        #expect(all.count == 1)
        return all.first
    }

    @Test func pyAPNsFrameFixtureDecodes() {
        // PyAPNs tests.py testFrame: 121 bytes, frame length 116.
        let bytes = Frames.frame(id: 1, expiry: 3600, priority: 10)
        #expect(bytes.count == 121)
        guard case .notification(let n)? = only(bytes) else { Issue.record("not decoded"); return }
        #expect(n.command == .frame && n.identifier == 1 && n.expiry == 3600 && n.priority == 10)
        #expect(n.deviceTokenHex == String(repeating: "ab", count: 32))
        #expect(n.payloadJSON["aps"]?["badge"] == .int(4))
        #expect(n.payload == Frames.payload)
    }

    @Test func everySplitOfThreeNotificationsGivesTheSameThree() {
        let stream = Frames.simple() + Frames.enhanced(id: 7, expiry: 99) + Frames.frame(id: 8)
        let whole = decodeAll([stream])
        #expect(whole.count == 3)
        for cut in 1..<stream.count {
            #expect(decodeAll([Array(stream[..<cut]), Array(stream[cut...])]) == whole, "cut at \(cut)")
        }
        // And one byte at a time.
        #expect(decodeAll(stream.map { [$0] }) == whole)
    }

    @Test func commandsZeroAndOneCarryTheirFields() {
        guard case .notification(let simple)? = only(Frames.simple()) else { Issue.record("0"); return }
        #expect(simple.command == .simple && simple.identifier == 0 && simple.expiry == nil && simple.priority == 10)
        guard case .notification(let enhanced)? = only(Frames.enhanced(id: 0xDEADBEEF, expiry: 5)) else { Issue.record("1"); return }
        #expect(enhanced.identifier == 0xDEADBEEF && enhanced.expiry == 5 && enhanced.priority == 10)
    }

    func status(_ bytes: [UInt8], limit: Int = 2048) -> (APNsStatus, UInt32)? {
        guard case .rejected(let r)? = only(bytes, limit: limit) else { return nil }
        return (r.status, r.identifier)
    }

    @Test func everyFormStatus() {
        #expect(status(Frames.frame(id: 2, token: []))! == (.missingDeviceToken, 2))
        #expect(status(Frames.frame(id: 3, token: [0]))! == (.invalidTokenSize, 3))
        #expect(status(Frames.frame(id: 4, payload: []))! == (.missingPayload, 4))
        #expect(status(Frames.frame(id: 5, payload: Array("[1]".utf8)))! == (.missingPayload, 5))
        #expect(status(Frames.frame(id: 6, payload: Array(#"{"aps":1}"#.utf8)))! == (.missingPayload, 6))
        let big = Array(#"{"aps":{"alert":""#.utf8) + [UInt8](repeating: 0x61, count: 2040) + Array(#""}}"#.utf8)
        #expect(status(Frames.frame(id: 7, payload: big))! == (.invalidPayloadSize, 7))
        let small = Array(#"{"aps":{"alert":""#.utf8) + [UInt8](repeating: 0x61, count: 230) + Array(#""}}"#.utf8)
        #expect(status(Frames.frame(id: 8, payload: small), limit: 256) == nil)  // 250 bytes: taken
        #expect(status(Frames.frame(id: 9, priority: 7))! == (.unknown, 9))
        let t = Frames.item(1, Frames.token), p = Frames.item(2, Frames.payload), i = Frames.item(3, Frames.u32(11))
        #expect(status(Frames.frame(items: t + p + i + Frames.item(9, [1])))! == (.unknown, 11))   // unknown item
        #expect(status(Frames.frame(items: t + t + p + i))! == (.unknown, 11))                    // duplicate
        #expect(status(Frames.frame(items: p + i))! == (.missingDeviceToken, 11))                 // missing token
        #expect(status(Frames.frame(items: t + i))! == (.missingPayload, 11))                     // missing payload
        #expect(status(Frames.frame(items: t + p + Frames.item(3, [1, 2])))! == (.unknown, 0))     // short identifier
        #expect(status(Frames.frame(items: t + p + [3, 0, 9, 1]))! == (.protocolError, 0))        // item past the end
        #expect(status([2, 0xFF, 0xFF, 0xFF, 0xFF])! == (.protocolError, 0))                       // no frame is that long
        #expect(status(Frames.enhanced(id: 12, token: [1, 2]))! == (.invalidTokenSize, 12))
    }

    @Test func optionalItemsDefault() {
        let items = Frames.item(1, Frames.token) + Frames.item(2, Frames.payload)
        guard case .notification(let n)? = only(Frames.frame(items: items)) else { Issue.record("not decoded"); return }
        #expect(n.identifier == 0 && n.expiry == 0 && n.priority == 10)
    }

    @Test func unknownCommandIsClosedWithoutAnswer() {
        guard case .rejected(let r)? = only([9, 1, 2, 3]) else { Issue.record("not rejected"); return }
        #expect(r.command == nil && !r.sendsErrorResponse)
        guard case .rejected(let r0)? = only(Frames.simple(token: [])) else { Issue.record("not rejected"); return }
        #expect(r0.status == .missingDeviceToken && !r0.sendsErrorResponse)
    }

    @Test func errorResponseBytes() {
        #expect(APNsStatus.invalidToken.errorResponse(identifier: 124) == [8, 8, 0, 0, 0, 0x7C])
    }

    @Test func feedbackTupleIs38Bytes() {
        let tuple = FeedbackTuple(timestamp: 1_700_000_000, deviceTokenHex: String(repeating: "ab", count: 32))!
        var buffer = ByteBuffer()
        tuple.write(to: &buffer)
        #expect(buffer.readableBytes == 38)
        #expect(buffer.getInteger(at: 0, as: UInt32.self) == 1_700_000_000)
        #expect(buffer.getInteger(at: 4, as: UInt16.self) == 32)
        #expect(FeedbackTuple(timestamp: 1, deviceTokenHex: "zz") == nil)
    }

    @Test func messageMapping() {
        guard case .notification(let n)? = only(Frames.frame(id: 5, expiry: 1_700_000_600, priority: 5)) else { return }
        let m = n.message(nowMillis: 1_700_000_000_000)
        #expect(m.timeToLive == 600 && m.priority == .normal && m.messageID == "5")
        // The payload goes on as the provider wrote it, unparsed.
        #expect(m.apnsPayloadText == String(decoding: Frames.payload, as: UTF8.self) && m.apns?["payload"] == nil)
        #expect(n.parsedPayload == nil && n.payloadJSON["aps"]?["alert"] == "Hello World!")
        #expect(n.message(nowMillis: 1_800_000_000_000).timeToLive == 0)  // past: now or never
        guard case .notification(let simple)? = only(Frames.simple()) else { return }
        #expect(simple.message(nowMillis: 0).timeToLive == Message.maximumTimeToLive)
        // One the parser must read (a raw tab in a string: JSON that embedded it would not be JSON)
        // is parsed, and encoded anew for the device.
        let tabbed = Array("{\"aps\":{\"alert\":\"a\tb\"}}".utf8)
        guard case .notification(let parsed)? = only(Frames.frame(id: 6, payload: tabbed)) else { Issue.record("tab"); return }
        #expect(parsed.parsedPayload?["aps"]?["alert"] == "a\tb")
        #expect(parsed.message(nowMillis: 0).apns?["payload"]?["aps"]?["alert"] == "a\tb")
        #expect(parsed.message(nowMillis: 0).apnsPayloadText == nil)
    }
}
