import Foundation
@testable import GoogleAuth
import Testing

@Suite struct Base64URLTests {
    @Test func roundTripsEveryLengthAndByte() {
        for length in 0..<70 {
            let data = Data((0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 250) })
            let text = Base64URL.encode(data)
            #expect(Base64URL.decode(text) == data, "length \(length)")
        }
    }

    @Test(arguments: ["a", "abcde", "ab=", "ab+c", "ab/c", "ab c", "é", "AB"])
    func refusesWhatIsNotBase64URL(_ text: String) {
        // "AB": its last group leaves non-zero bits (the canonical form of that byte is "AA").
        #expect(Base64URL.decode(text) == nil)
    }

    @Test func decodesKnownValues() {
        #expect(Base64URL.decode("") == Data())
        #expect(Base64URL.decode("AA") == Data([0]))
        #expect(Base64URL.decode("_-8") == Data([0xFF, 0xEF]))
        #expect(Base64URL.decode("aGVsbG8") == Data("hello".utf8))
    }
}
