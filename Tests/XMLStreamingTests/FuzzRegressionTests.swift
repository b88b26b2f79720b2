import Testing
import XMLStreaming

/// Inputs the fuzzers found (Fixtures/fuzz/xml-stream/), fed as the network may deliver them.
@Suite struct FuzzRegressionTests {
    /// A stream whose namespace declaration is cut and repeated: expat's error index lies in bytes of an
    /// earlier piece, and the window the parser looked at around it had its bounds crossed (a crash).
    static let errorBeforeThePiece = Array(("<stream:stream to='gcm.googleapis.com' version='1.0' xmlns='jabber:client' "
        + "xmlns:stream='abber:client' xmlns:stream='http://etherx.jahttp://etherx.jabber.org/streams'>"
        + "<message id=\"\"><gcm xmlns=\"google:mobile:data\">{\"to\":\"no-such-token\"}</gcm></message>\n").utf8)

    @Test(arguments: 1...16)
    func anErrorFoundInAnEarlierPieceIsReportedNotACrash(pieceSize: Int) {
        let parser = XMLStreamParser(limits: .preAuth)
        var failed = false
        var start = 0
        while start < Self.errorBeforeThePiece.count, !failed {
            let piece = Array(Self.errorBeforeThePiece[start..<min(start + pieceSize, Self.errorBeforeThePiece.count)])
            do { _ = try parser.feed(piece) } catch { failed = true }
            start += pieceSize
        }
        #expect(failed, "a duplicate xmlns:stream declaration is not well formed")
    }
}
