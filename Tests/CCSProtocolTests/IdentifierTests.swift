import Testing
@testable import CCSProtocol
@testable import PushDomain

@Suite("Device message ids")
struct DeviceMessageIDTests {
    @Test func matchesFCMExample() {
        #expect(DeviceMessageID.make(micros: 1_587_579_700_287_156, senderHash: 0xA62F_20E7)
            == "0:1587579700287156%a62f20e7a62f20e7")
    }

    @Test func hashIsZeroPadded() {
        #expect(DeviceMessageID.make(micros: 5, senderHash: 0x1) == "0:5%0000000100000001")
        #expect(DeviceMessageID.make(micros: 0, senderHash: 0) == "0:0%0000000000000000")
        #expect(DeviceMessageID.make(micros: 1, senderHash: .max) == "0:1%ffffffffffffffff")
        #expect(DeviceMessageID.make(micros: .max, senderHash: 0x1234_5678) == "0:9223372036854775807%1234567812345678")
        #expect(DeviceMessageID.make(micros: 1_000_000_007, senderHash: 0xA0B) == "0:1000000007%00000a0b00000a0b")
    }

    @Test func senderHashIsFNV1a() {
        #expect(DeviceMessageID.senderHash("") == 0x811C_9DC5)
        #expect(DeviceMessageID.senderHash("a") == 0xE40C_292C)
        #expect(DeviceMessageID.senderHash("123456789") == DeviceMessageID.senderHash("123456789"))
        #expect(DeviceMessageID.senderHash("123456789") != DeviceMessageID.senderHash("123456780"))
    }

    @Test func looksValid() {
        #expect(DeviceMessageID.looksValid("0:1587579700287156%a62f20e7a62f20e7"))
        #expect(!DeviceMessageID.looksValid("0:1587579700287156%a62f20e7a62f20e8"))
        #expect(!DeviceMessageID.looksValid("1:1587579700287156%a62f20e7a62f20e7"))
        #expect(!DeviceMessageID.looksValid("0:%a62f20e7a62f20e7"))
        #expect(!DeviceMessageID.looksValid("0:12%A62F20E7A62F20E7"))
        #expect(!DeviceMessageID.looksValid("0:12a62f20e7a62f20e7"))
        #expect(!DeviceMessageID.looksValid("m-1"))
    }

    @Test func distinctMicrosGiveDistinctIDs() {
        let hash = DeviceMessageID.senderHash("42")
        let ids = Set((0..<10_000).map { DeviceMessageID.make(micros: 1_700_000_000_000_000 + Int64($0), senderHash: hash) })
        #expect(ids.count == 10_000)
        #expect(ids.allSatisfy(DeviceMessageID.looksValid))
    }
}

@Suite("Registration tokens")
struct RegistrationTokenTests {
    static func isBase64URL(_ string: some StringProtocol) -> Bool {
        string.utf8.allSatisfy(RegistrationToken.isBase64URL)
    }

    @Test func instanceIDShape() {
        let id = RegistrationToken.makeInstanceID()
        #expect(id.utf8.count == 22)
        #expect(Self.isBase64URL(id))
    }

    @Test func tokenShape() throws {
        let instanceID = RegistrationToken.makeInstanceID()
        let token = RegistrationToken.make(instanceID: instanceID)
        #expect(token.utf8.count == 22 + 1 + 6 + 134)
        #expect(token.hasPrefix(instanceID + ":APA91b"))
        #expect(Self.isBase64URL(token.dropFirst(29)))
        #expect(RegistrationToken.instanceID(of: token) == instanceID)
        #expect(RegistrationToken.looksValid(token))
    }

    @Test func tenThousandTokensAreUnique() {
        var tokens = Set<String>()
        var instanceIDs = Set<String>()
        var symbols = Set<UInt8>()
        for _ in 0..<10_000 {
            let instanceID = RegistrationToken.makeInstanceID()
            instanceIDs.insert(instanceID)
            let token = RegistrationToken.make(instanceID: instanceID)
            tokens.insert(token)
            symbols.formUnion(token.utf8.dropFirst(29))
        }
        #expect(tokens.count == 10_000)
        #expect(instanceIDs.count == 10_000)
        // Every base64url symbol shows up: the random part uses the whole alphabet.
        #expect(symbols.count == 64)
    }

    @Test func tokensFromTheSameInstanceDiffer() {
        let instanceID = RegistrationToken.makeInstanceID()
        #expect(RegistrationToken.make(instanceID: instanceID) != RegistrationToken.make(instanceID: instanceID))
    }

    @Test func looksValidAcceptsRealShapes() {
        let random = String(repeating: "Ab0-_", count: 28)
        #expect(RegistrationToken.looksValid("dQw4w9WgXcQ:APA91b" + random))
        #expect(RegistrationToken.looksValid("APA91b" + random))  // old GCM registration id
        #expect(RegistrationToken.looksValid("x:APA91b0123456789"))
    }

    @Test(arguments: [
        "", "tok", "REGID", "APA91b", "APA91b123456789", ":APA91b0123456789", "a b:APA91b0123456789",
        "abc:APA91b01234567 9", "abc:APB91b0123456789", "abc:APA91b0123456789=", "a.b:APA91b0123456789",
        "/topics/news",
    ])
    func looksValidRejectsOtherStrings(token: String) {
        #expect(!RegistrationToken.looksValid(token))
    }

    @Test func looksValidRejectsHugeTokens() {
        #expect(!RegistrationToken.looksValid("APA91b" + String(repeating: "a", count: 4091)))
        #expect(RegistrationToken.looksValid("APA91b" + String(repeating: "a", count: 4090)))
    }
}

@Suite struct InstanceIDShapeTests {
    @Test func instanceIDsStartLikeFirebaseInstallationIDs() {
        for _ in 0..<500 {
            let id = RegistrationToken.makeInstanceID()
            #expect(id.count == 22)
            #expect("cdef".contains(id.first!))
        }
    }
}
