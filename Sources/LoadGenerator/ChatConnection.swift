import NIOCore
import Synchronization

/// Per sender: messages its receivers have seen. Where the sender gets no answer it could use as a window
/// (XMPP chat: no per-message ACK without XEP-0198; upstream: the device's `sent` comes before the app
/// server has the message), its window closes on delivery instead, so a closed loop cannot pile up an
/// unbounded backlog inside the server.
public final class DeliveryCredits: Sendable {
    final class Credit: Sendable {
        let value = Atomic<Int>(0)
    }

    let credits: [Credit]

    public init(senders: Int) {
        credits = (0..<senders).map { _ in Credit() }
    }
}

/// A client of a standard XMPP server (Prosody, ejabberd, …). As a sender: `<message type="chat">`
/// to the receivers' full JIDs, round-robin, with `SENDER SEQ STAMP PADDING` in the body. As a
/// receiver: measures send→receive latency and credits the sender.
final class ChatConnection: BenchConnection {
    let senderIndex: Int
    let recipients: Recipients?
    let credits: DeliveryCredits
    var cursor: Int

    init(login: XMPPLogin, recorder: LoopRecorder, established: EventLoopPromise<Void>, index: Int,
         sending: (plan: SendPlan, control: RunControl, recipients: Recipients)?, credits: DeliveryCredits,
         payloadBytes: Int) {
        recipients = sending?.recipients
        cursor = sending.map { $0.recipients.count > 0 ? index % $0.recipients.count : 0 } ?? 0
        senderIndex = index
        self.credits = credits
        super.init(login: login, recorder: recorder, established: established,
                   sender: sending.map { Sender(plan: $0.plan, control: $0.control, tracksAnswers: false) },
                   payloadBytes: payloadBytes)
    }

    override func pump(now: UInt64) {
        guard sender != nil, let recipients, recipients.count > 0 else { return }
        let credited = credits.credits[senderIndex].value.load(ordering: .relaxed)
        let unanswered = Int(sender!.nextSeq) - credited
        sender!.pump(now: now, recorder: recorder, unanswered: unanswered) { seq, stamp in
            let jid = recipients.items[cursor]
            cursor += 1
            if cursor == recipients.count { cursor = 0 }
            out.writeStaticString("<message type=\"chat\" to=\"")
            out.writeBytes(jid)
            out.writeStaticString("\"><body>")
            out.writeDecimal(senderIndex)
            out.writeStaticString(" ")
            out.writeDecimal(seq)
            out.writeStaticString(" ")
            out.writeDecimal(stamp)
            out.writeStaticString(" ")
            out.writeBytes(payload)
            out.writeStaticString("</body></message>")
        }
    }

    override func message(_ s: UnsafeRawBufferPointer, now: UInt64) {
        if ByteScan.isErrorType(s) {
            // A bounce: the sender takes its own credit back, or its window would shrink for good.
            recorder.errors.add(1, ordering: .relaxed)
            if sender != nil { credits.credits[senderIndex].value.add(1, ordering: .relaxed) }
            return
        }
        guard let open = ByteScan.find("<body>", in: s, from: 0),
              let close = ByteScan.find("</body>", in: s, from: open) else {
            recorder.unexpected.add(1, ordering: .relaxed)
            return
        }
        // SENDER SEQ STAMP PADDING
        let start = open + 6
        guard let sp1 = ByteScan.index(of: UInt8(ascii: " "), in: s, from: start), sp1 < close,
              let sp2 = ByteScan.index(of: UInt8(ascii: " "), in: s, from: sp1 + 1), sp2 < close,
              let sp3 = ByteScan.index(of: UInt8(ascii: " "), in: s, from: sp2 + 1), sp3 <= close,
              let from = ByteScan.decimal(s, start..<sp1), Int(from) < credits.credits.count,
              let stamp = ByteScan.decimal(s, (sp2 + 1)..<sp3) else {
            recorder.unexpected.add(1, ordering: .relaxed)
            return
        }
        recorder.recordDelivery(sentAt: stamp, now: now)
        credits.credits[Int(from)].value.add(1, ordering: .relaxed)
    }
}
