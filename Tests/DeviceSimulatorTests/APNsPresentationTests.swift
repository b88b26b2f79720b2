import CCSProtocol
import PushDomain
import Testing
@testable import DeviceSimulator

@Suite struct APNsPresentationTests {
    func presentation(_ pushType: String?, aps: String) throws -> APNsPresentation.Presentation? {
        let apns = pushType.map { #","apns":{"push_type":"\#($0)"}"# } ?? ""
        let message = try JSONValue.parse(#"{"message_type":"apns","payload":{"aps":\#(aps)}\#(apns)}"#)
        return APNsPresentation(message: message)?.presentation
    }

    @Test func howIOSPresentsEachPushType() throws {
        #expect(try presentation(nil, aps: #"{"alert":"hi"}"#) == .alert)
        #expect(try presentation(nil, aps: #"{"content-available":1}"#) == .backgroundWakeup)
        #expect(try presentation(nil, aps: "{}") == APNsPresentation.Presentation.none)
        #expect(try presentation("alert", aps: #"{"badge":1}"#) == .alert)
        #expect(try presentation("background", aps: #"{"content-available":1}"#) == .backgroundWakeup)
        #expect(try presentation("voip", aps: "{}") == .voipCall)
        #expect(try presentation("liveactivity", aps: #"{"event":"update"}"#) == .liveActivityUpdate)
        #expect(try presentation("pushtotalk", aps: "{}") == .pushToTalk)
        #expect(try presentation("widgets", aps: "{}") == .widgetReload)
    }
}
