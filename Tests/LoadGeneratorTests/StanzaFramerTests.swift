import NIOCore
import Testing
@testable import LoadGenerator

/// Feeds `text` in pieces of `chunk` bytes and collects every event as text.
private func frame(_ text: String, chunk: Int = .max, restartAfter: String? = nil) throws -> [String] {
    var framer = StanzaFramer(capacity: 16)
    var events: [String] = []
    let bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let end = min(bytes.count, offset + max(1, min(chunk, bytes.count)))
        var buffer = ByteBuffer(bytes: bytes[offset..<end])
        framer.append(&buffer)
        offset = end
        while let event = try framer.next() {
            switch event {
            case .streamOpen(let r):
                events.append("open " + framer.withBytes(r) { String(decoding: $0, as: UTF8.self) })
            case .stanza(let r):
                let s = framer.withBytes(r) { String(decoding: $0, as: UTF8.self) }
                events.append(s)
                if let restartAfter, s.hasPrefix(restartAfter) { framer.restart() }
            case .streamClose:
                events.append("close")
            }
        }
    }
    return events
}

@Suite("Stanza framer")
struct StanzaFramerTests {
    static let stream = """
        <?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' id='1' version='1.0'>\
        <stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>\
        <message id="a&gt;b" note='x>y'><gcm xmlns="google:mobile:data">{"message_id":"b1.7","message_type":"ack"}</gcm></message>
        <presence/><!-- a comment with <tags> --><iq type="result" id="p"/>\
        <message><body><![CDATA[<not a tag>]]></body></message></stream:stream>
        """

    static let expected = [
        "open <stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' id='1' version='1.0'>",
        "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>",
        #"<message id="a&gt;b" note='x>y'><gcm xmlns="google:mobile:data">{"message_id":"b1.7","message_type":"ack"}</gcm></message>"#,
        "<presence/>",
        #"<iq type="result" id="p"/>"#,
        "<message><body><![CDATA[<not a tag>]]></body></message>",
        "close",
    ]

    @Test func wholeStream() throws {
        #expect(try frame(Self.stream) == Self.expected)
    }

    @Test(arguments: [1, 2, 3, 5, 7, 13, 64])
    func everySplit(chunk: Int) throws {
        #expect(try frame(Self.stream, chunk: chunk) == Self.expected)
    }

    @Test func restartAfterSASLSuccess() throws {
        let text = "<stream:stream a='1'><success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>"
            + "<stream:stream a='2'><stream:features><bind/></stream:features>"
        #expect(try frame(text, restartAfter: "<success") == [
            "open <stream:stream a='1'>", "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>",
            "open <stream:stream a='2'>", "<stream:features><bind/></stream:features>",
        ])
    }

    @Test func manyStanzasReuseTheBuffer() throws {
        var framer = StanzaFramer(capacity: 256)
        var buffer = ByteBuffer(string: "<stream:stream>")
        framer.append(&buffer)
        _ = try framer.next()
        var count = 0
        for i in 0..<10_000 {
            var b = ByteBuffer(string: "<message id='\(i)'><body>hello</body></message>")
            framer.append(&b)
            while case .stanza? = try framer.next() { count += 1 }
        }
        #expect(count == 10_000)
        #expect(framer.bufferedBytes < 256)
    }

    @Test func unbalancedEndTagIsAnError() throws {
        #expect(throws: StanzaFramer.Malformed.self) { try frame("<a></a></b>") }
    }
}

@Suite("Byte scanning")
struct ByteScanTests {
    private func with<R>(_ s: String, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        Array(s.utf8).withUnsafeBytes(body)
    }

    @Test func localNames() {
        with("<stream:features><x/></stream:features>") { #expect(ByteScan.nameIs($0, "features")) }
        with("<message to='a'>") { #expect(ByteScan.nameIs($0, "message")) }
        with("<messages>") { #expect(!ByteScan.nameIs($0, "message")) }
        with("<iq/>") { #expect(ByteScan.nameIs($0, "iq")) }
    }

    @Test func attributes() {
        let s = #"<message xid="no" id="0:17%ab" type='error'><gcm>id="inner"</gcm></message>"#
        with(s) { b in
            let id = ByteScan.attribute("id=", in: b)
            #expect(id.map { String(decoding: b[$0], as: UTF8.self) } == "0:17%ab")
            let type = ByteScan.attribute("type=", in: b)
            #expect(type.map { ByteScan.equals(b, $0, "error") } == true)
            #expect(ByteScan.attribute("to=", in: b) == nil)
        }
        // Only the start tag is searched.
        with(#"<message><body id="x"/></message>"#) { #expect(ByteScan.attribute("id=", in: $0) == nil) }
    }

    @Test func jsonMembers() {
        let s = #"<message><gcm xmlns="google:mobile:data">{"from":"tok:APA91b","message_id":"b12.345","message_type":"ack"}</gcm></message>"#
        with(s) { b in
            let id = ByteScan.jsonString("\"message_id\":\"", in: b)!
            #expect(String(decoding: b[id], as: UTF8.self) == "b12.345")
            #expect(ByteScan.sequenceNumber(b, id) == 345)
            let kind = ByteScan.jsonString("\"message_type\":\"", in: b)!
            #expect(ByteScan.equals(b, kind, "ack"))
            let from = ByteScan.jsonString("\"from\":\"", in: b)!
            #expect(String(decoding: b[from], as: UTF8.self) == "tok:APA91b")
            #expect(ByteScan.jsonString("\"bt\":\"", in: b) == nil)
        }
    }

    @Test func decimals() {
        with("12345x18446744073709551615 18446744073709551616") { b in
            #expect(ByteScan.decimal(b, 0..<5) == 12345)
            #expect(ByteScan.decimal(b, 0..<6) == nil)
            #expect(ByteScan.decimal(b, 6..<26) == UInt64.max)
            #expect(ByteScan.decimal(b, 27..<47) == nil) // overflow
            #expect(ByteScan.decimal(b, 3..<3) == nil)
        }
    }

    @Test func find() {
        with("aaab>PLAIN<ab") { b in
            #expect(ByteScan.find(">PLAIN<", in: b, from: 0) == 4)
            #expect(ByteScan.find("ab", in: b, from: 3) == 11)
            #expect(ByteScan.find("abc", in: b, from: 0) == nil)
            #expect(ByteScan.find("b", in: b, from: 13) == nil)
        }
    }
}

@Suite("Stanza writing")
struct StanzaWriterTests {
    @Test func decimalsWithoutStrings() {
        var b = ByteBuffer()
        for v: UInt64 in [0, 7, 10, 99, 100, 1_234_567_890, UInt64.max] {
            b.writeDecimal(v)
            b.writeString(",")
        }
        #expect(String(buffer: b) == "0,7,10,99,100,1234567890,18446744073709551615,")
    }

    @Test func saslPlain() {
        // RFC 4616: base64("\0user\0password").
        #expect(StanzaWriter.saslPlain(user: "123@gcm.googleapis.com", password: "key")
            == #"<auth xmlns="urn:ietf:params:xml:ns:xmpp-sasl" mechanism="PLAIN">ADEyM0BnY20uZ29vZ2xlYXBpcy5jb20Aa2V5</auth>"#)
        #expect(StanzaWriter.base64(Array("a".utf8)) == "YQ==")
        #expect(StanzaWriter.base64(Array("ab".utf8)) == "YWI=")
        #expect(StanzaWriter.base64(Array("abc".utf8)) == "YWJj")
        #expect(StanzaWriter.base64([]) == "")
    }
}
