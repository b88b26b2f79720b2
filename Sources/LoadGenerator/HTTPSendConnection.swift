import NIOCore

/// Which HTTP request a bench sender repeats.
public enum HTTPBenchAPI: String, Sendable, CaseIterable {
    /// `POST /v1/projects/P/messages:send` with a Bearer token.
    case v1
    /// `POST /fcm/send` with `key=`.
    case legacy
    /// `POST /emulator/bench/noop` with the v1 body: the HTTP server's ceiling (no engine, no auth).
    case noop
    /// `POST /fcm/send/<token>`: Web Push to the emulator as the push service, each payload encrypted.
    case webpush
}

/// One keep-alive HTTP/1.1 connection that sends messages to the devices round-robin and reads the
/// answers in order (at most `window` unanswered: 1 is what real clients do; more is pipelining).
/// The body carries the send stamp in `data.bt`, so the devices measure send→device as in the
/// CCS scenarios. No XMPP login: the connection is ready once TCP (and TLS) is up.
final class HTTPSendConnection: BenchConnection {
    let api: HTTPBenchAPI
    let recipients: Recipients
    var cursor: Int
    /// Everything of the request up to the body's length digits, written once per request.
    let head: [UInt8]
    var inbound: ByteBuffer
    /// Answers arrive in request order: the sequence number of the oldest unanswered request.
    var nextAnswer: UInt64 = 0
    /// `.webpush`: the subscriptions and the VAPID token.
    let webPush: WebPushPlan?

    init(api: HTTPBenchAPI, host: String, path: String, authorization: String?, recorder: LoopRecorder,
         established: EventLoopPromise<Void>, index: Int,
         sending: (plan: SendPlan, control: RunControl, recipients: Recipients), payloadBytes: Int,
         webPush: WebPushPlan? = nil) {
        self.api = api
        self.webPush = webPush
        recipients = sending.recipients
        cursor = sending.recipients.count > 0 ? index % sending.recipients.count : 0
        var h = "POST \(path) HTTP/1.1\r\nHost: \(host)\r\nContent-Type: application/json\r\n"
        if let authorization { h += "Authorization: \(authorization)\r\n" }
        h += "Content-Length: "
        head = Array(h.utf8)
        inbound = ByteBufferAllocator().buffer(capacity: 4096)
        super.init(login: XMPPLogin(domain: "", user: "", password: ""), recorder: recorder, established: established,
                   sender: Sender(plan: sending.plan, control: sending.control), payloadBytes: payloadBytes)
    }

    override func channelActive(context: ChannelHandlerContext) {
        becomeReady()
        context.fireChannelActive()
    }

    override func pump(now: UInt64) {
        guard sender != nil, recipients.count > 0 else { return }
        sender!.pump(now: now, recorder: recorder) { seq, stamp in
            let token = recipients.items[cursor]
            let recipient = cursor
            cursor += 1
            if cursor == recipients.count { cursor = 0 }
            if let webPush {
                guard let request = WebPushBench.request(webPush, recipient: recipient, token: token, stamp: stamp,
                                                         payload: payload) else { return fail("a payload too big for Web Push") }
                out.writeBytes(request)
            } else {
                writeRequest(token: token, stamp: stamp)
            }
        }
    }

    @inline(__always)
    private func writeRequest(token: [UInt8], stamp: UInt64) {
        // {"message":{"token":T,"data":{"bt":"S","p":"P"}}} or {"to":T,"data":{…}}: the length first.
        var body = ByteBufferAllocator().buffer(capacity: 96 + token.count + payload.count)
        if api == .legacy {
            body.writeStaticString("{\"to\":\"")
        } else {
            body.writeStaticString("{\"message\":{\"token\":\"")
        }
        body.writeBytes(token)
        body.writeStaticString("\",\"data\":{\"bt\":\"")
        body.writeDecimal(stamp)
        body.writeStaticString("\",\"p\":\"")
        body.writeBytes(payload)
        body.writeStaticString(api == .legacy ? "\"}}" : "\"}}}")
        out.writeBytes(head)
        out.writeDecimal(UInt64(body.readableBytes))
        out.writeStaticString("\r\n\r\n")
        out.writeBuffer(&body)
    }

    override func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        inbound.writeBuffer(&bytes)
        let now = MonotonicClock.nanos()
        while let (status, body) = nextResponse() {
            answered(status: status, body: body, now: now)
        }
        if inbound.readerIndex > 0 && inbound.readableBytes == 0 { inbound.clear() }
        pump(now: now)
    }

    /// One complete response (status, body) from `inbound`, or nil until it has all arrived.
    private func nextResponse() -> (Int, ByteBufferView)? {
        let view = inbound.readableBytesView
        guard let end = Self.find([0x0D, 0x0A, 0x0D, 0x0A], in: view) else { return nil }
        let headText = String(decoding: view[view.startIndex..<end], as: UTF8.self)
        let lines = headText.split(separator: "\r\n")
        guard let statusLine = lines.first, statusLine.count >= 12,
              let status = Int(statusLine.dropFirst(9).prefix(3)) else {
            fail("malformed HTTP response")
            return nil
        }
        var length = 0
        for line in lines.dropFirst() where line.lowercased().hasPrefix("content-length:") {
            length = Int(line.dropFirst(15).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        let bodyStart = end + 4
        guard view.endIndex - bodyStart >= length else { return nil }
        let body = view[bodyStart..<(bodyStart + length)]
        inbound.moveReaderIndex(forwardBy: bodyStart + length - view.startIndex)
        return (status, body)
    }

    private func answered(status: Int, body: ByteBufferView, now: UInt64) {
        let seq = nextAnswer
        nextAnswer &+= 1
        guard let sentAt = sender?.ring.remove(seq) else {
            recorder.unexpected.add(1, ordering: .relaxed)
            return
        }
        // A legacy answer is 200 even when the token failed: its "success" says.
        // Web Push answers 201 Created (RFC 8030 §5).
        let accepted = api == .webpush ? status == 201
            : status == 200 && (api != .legacy || Self.find(Array("\"success\":1".utf8), in: body) != nil)
        if accepted {
            recorder.recordAck(sentAt: sentAt, now: now)
        } else {
            recorder.errors.add(1, ordering: .relaxed)
        }
    }

    static func find(_ needle: [UInt8], in view: ByteBufferView) -> Int? {
        guard view.count >= needle.count else { return nil }
        var i = view.startIndex
        let last = view.endIndex - needle.count
        while i <= last {
            if view[i] == needle[0] {
                var j = 1
                while j < needle.count && view[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }
}
