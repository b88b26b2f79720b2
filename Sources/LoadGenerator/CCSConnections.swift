import NIOCore
import WebPushService

/// Static parts of the stanzas, as bytes.
enum CCSBytes {
    static let gcmOpen: StaticString = "<message><gcm xmlns=\"google:mobile:data\">"
    static let gcmClose: StaticString = "</gcm></message>"
}

/// An app server on the CCS port. Downstream: sends `{"to":TOKEN,"message_id":…,"data":{"bt":…,"p":…}}`
/// to the devices round-robin, at most `window` unanswered, and matches ACKs/NACKs by message id.
/// Upstream: ACKs every upstream message and measures its latency from the device's `bt` stamp.
final class AppServerConnection: BenchConnection {
    let recipients: Recipients?
    /// `b<connection>.`: message ids are this plus a sequence number.
    let idPrefix: [UInt8]
    var cursor: Int
    var draining = false
    /// Upstream: credits the sending device (by the index in its message ids) for each message received.
    let upstreamCredits: DeliveryCredits?

    init(login: XMPPLogin, recorder: LoopRecorder, established: EventLoopPromise<Void>, index: Int,
         sending: (plan: SendPlan, control: RunControl, recipients: Recipients)?, upstreamCredits: DeliveryCredits? = nil,
         payloadBytes: Int) {
        self.upstreamCredits = upstreamCredits
        recipients = sending?.recipients
        cursor = sending.map { $0.recipients.count > 0 ? index % $0.recipients.count : 0 } ?? 0
        idPrefix = Array("b\(index).".utf8)
        super.init(login: login, recorder: recorder, established: established,
                   sender: sending.map { Sender(plan: $0.plan, control: $0.control) }, payloadBytes: payloadBytes)
    }

    override func pump(now: UInt64) {
        guard sender != nil, let recipients, recipients.count > 0, !draining else { return }
        sender!.pump(now: now, recorder: recorder) { seq, stamp in
            let token = recipients.items[cursor]
            cursor += 1
            if cursor == recipients.count { cursor = 0 }
            out.writeBenchMessage(to: token, idPrefix: idPrefix, seq: seq, stamp: stamp, payload: payload)
        }
    }

    override func message(_ s: UnsafeRawBufferPointer, now: UInt64) {
        if ByteScan.isErrorType(s) {
            recorder.errors.add(1, ordering: .relaxed)
            answered(s, now: now, record: nil)
            pump(now: now)
            return
        }
        guard let kind = ByteScan.jsonString("\"message_type\":\"", in: s) else {
            upstream(s, now: now)
            return
        }
        if ByteScan.equals(s, kind, "ack") {
            answered(s, now: now, record: .ack)
        } else if ByteScan.equals(s, kind, "nack") {
            recorder.nacked.add(1, ordering: .relaxed)
            answered(s, now: now, record: nil)
        } else if ByteScan.equals(s, kind, "control") {
            // CONNECTION_DRAINING: this connection sends no more.
            draining = true
            sender?.stoppedByServer = true
        } else {
            recorder.unexpected.add(1, ordering: .relaxed) // receipts: not requested by the generator
        }
        pump(now: now)
    }

    private enum Outcome { case ack }

    @inline(__always)
    private func answered(_ s: UnsafeRawBufferPointer, now: UInt64, record: Outcome?) {
        guard let idRange = ByteScan.jsonString("\"message_id\":\"", in: s),
              let seq = ByteScan.sequenceNumber(s, idRange),
              let sentAt = sender?.ring.remove(seq) else {
            recorder.unexpected.add(1, ordering: .relaxed)
            return
        }
        if record != nil { recorder.recordAck(sentAt: sentAt, now: now) }
    }

    /// An upstream message: measure, then ACK it as an app server must.
    @inline(__always)
    private func upstream(_ s: UnsafeRawBufferPointer, now: UInt64) {
        guard let id = ByteScan.jsonString("\"message_id\":\"", in: s),
              let from = ByteScan.jsonString("\"from\":\"", in: s) else {
            recorder.unexpected.add(1, ordering: .relaxed)
            return
        }
        if let bt = ByteScan.jsonString("\"bt\":\"", in: s), let stamp = ByteScan.decimal(s, bt) {
            recorder.recordDelivery(sentAt: stamp, now: now)
            if let upstreamCredits, let device = Self.deviceIndex(s, id), device < upstreamCredits.credits.count {
                upstreamCredits.credits[device].value.add(1, ordering: .relaxed)
            }
        } else {
            recorder.unexpected.add(1, ordering: .relaxed)
        }
        out.writeStaticString(CCSBytes.gcmOpen)
        out.writeStaticString("{\"to\":\"")
        out.writeBytes(UnsafeRawBufferPointer(rebasing: s[from]))
        out.writeStaticString("\",\"message_id\":\"")
        out.writeBytes(UnsafeRawBufferPointer(rebasing: s[id]))
        out.writeStaticString("\",\"message_type\":\"ack\"}")
        out.writeStaticString(CCSBytes.gcmClose)
    }
}

extension AppServerConnection {
    /// `u<device>.<seq>` → device.
    static func deviceIndex(_ s: UnsafeRawBufferPointer, _ id: Range<Int>) -> Int? {
        guard id.count > 2, s[id.lowerBound] == UInt8(ascii: "u"),
              let dot = ByteScan.index(of: UInt8(ascii: "."), in: s, from: id.lowerBound + 1), dot < id.upperBound,
              let n = ByteScan.decimal(s, (id.lowerBound + 1)..<dot) else { return nil }
        return Int(n)
    }
}

/// A simulated device on the device channel. Downstream: ACKs every message with its stanza id and
/// measures send→device latency from the `bt` stamp. Upstream: sends messages to the sender and
/// matches the channel's `sent` answers. Idle: holds the connection and answers pings.
final class DeviceChannelConnection: BenchConnection {
    let upstreamTo: [UInt8]
    let idPrefix: [UInt8]
    let index: Int
    let credits: DeliveryCredits?
    /// A simulated browser's keys (`bench web-push`): each message is decrypted before its stamp is read.
    let webPushKeys: SubscriptionPrivateKeys?

    init(login: XMPPLogin, recorder: LoopRecorder, established: EventLoopPromise<Void>, index: Int,
         upstream: (plan: SendPlan, control: RunControl, senderID: String, credits: DeliveryCredits)?, payloadBytes: Int,
         webPushKeys: SubscriptionPrivateKeys? = nil) {
        self.webPushKeys = webPushKeys
        upstreamTo = upstream.map { Array("\($0.senderID)@gcm.googleapis.com".utf8) } ?? []
        credits = upstream?.credits
        self.index = index
        idPrefix = Array("u\(index).".utf8)
        super.init(login: login, recorder: recorder, established: established,
                   sender: upstream.map { Sender(plan: $0.plan, control: $0.control) }, payloadBytes: payloadBytes)
    }

    /// The generator's devices only ACK: they ask the emulator not to render each message's platform
    /// view for them (docs/device-protocol.md), so the figures measure delivery, not rendering.
    override func ready(context: ChannelHandlerContext) {
        out.writeStaticString(CCSBytes.gcmOpen)
        out.writeStaticString("{\"message_type\":\"views\",\"enabled\":false}")
        out.writeStaticString(CCSBytes.gcmClose)
    }

    override func pump(now: UInt64) {
        guard sender != nil, let credits else { return }
        // The window closes on delivery to an app server, not on `sent` (see DeliveryCredits).
        let unanswered = Int(sender!.nextSeq) - credits.credits[index].value.load(ordering: .relaxed)
        sender!.pump(now: now, recorder: recorder, unanswered: unanswered) { seq, stamp in
            out.writeBenchMessage(to: upstreamTo, idPrefix: idPrefix, seq: seq, stamp: stamp, payload: payload)
        }
    }

    override func message(_ s: UnsafeRawBufferPointer, now: UInt64) {
        if ByteScan.isErrorType(s) {
            recorder.errors.add(1, ordering: .relaxed)
            return
        }
        guard let stanzaID = ByteScan.attribute("id=", in: s) else {
            // No stanza id: the answer to one of our upstream messages.
            answer(s, now: now)
            return
        }
        if let webPushKeys {
            // The stamp is inside the encrypted payload: decrypted first, as the browser does.
            if let stamp = WebPushBench.stamp(in: s, keys: webPushKeys) {
                recorder.recordDelivery(sentAt: stamp, now: now)
            } else {
                recorder.unexpected.add(1, ordering: .relaxed)
            }
        } else if let bt = ByteScan.jsonString("\"bt\":\"", in: s), let stamp = ByteScan.decimal(s, bt) {
            recorder.recordDelivery(sentAt: stamp, now: now)
        } else {
            recorder.unexpected.add(1, ordering: .relaxed)
        }
        out.writeStaticString(CCSBytes.gcmOpen)
        out.writeStaticString("{\"message_type\":\"ack\",\"message_id\":\"")
        out.writeBytes(UnsafeRawBufferPointer(rebasing: s[stanzaID]))
        out.writeStaticString("\"}")
        out.writeStaticString(CCSBytes.gcmClose)
    }

    @inline(__always)
    private func answer(_ s: UnsafeRawBufferPointer, now: UInt64) {
        guard let kind = ByteScan.jsonString("\"message_type\":\"", in: s),
              let idRange = ByteScan.jsonString("\"message_id\":\"", in: s),
              let seq = ByteScan.sequenceNumber(s, idRange),
              let sentAt = sender?.ring.remove(seq) else {
            recorder.unexpected.add(1, ordering: .relaxed)
            return
        }
        if ByteScan.equals(s, kind, "sent") {
            recorder.recordAck(sentAt: sentAt, now: now)
        } else {
            recorder.nacked.add(1, ordering: .relaxed) // send_error
        }
        pump(now: now)
    }
}

extension ByteBuffer {
    /// The generator's one message shape, downstream and upstream alike, written without allocating:
    /// `<message><gcm …>{"to":TO,"message_id":PREFIX+SEQ,"data":{"bt":"STAMP","p":"PAYLOAD"}}</gcm></message>`.
    @inline(__always)
    mutating func writeBenchMessage(to: [UInt8], idPrefix: [UInt8], seq: UInt64, stamp: UInt64, payload: [UInt8]) {
        writeStaticString(CCSBytes.gcmOpen)
        writeStaticString("{\"to\":\"")
        writeBytes(to)
        writeStaticString("\",\"message_id\":\"")
        writeBytes(idPrefix)
        writeDecimal(seq)
        writeStaticString("\",\"data\":{\"bt\":\"")
        writeDecimal(stamp)
        writeStaticString("\",\"p\":\"")
        writeBytes(payload)
        writeStaticString("\"}}")
        writeStaticString(CCSBytes.gcmClose)
    }
}
