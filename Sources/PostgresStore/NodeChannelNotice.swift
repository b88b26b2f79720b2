/// What a payload on a node's own channel (`ccs_node_<id>`) means (docs/scaling.md). Only two kinds
/// are taken: offers and confirmations sealed by another node (`NotifySeal`), and a bare token, a
/// hint that the device's queue changed, which the node checks by reading the queue. Anything else
/// (an unsealed offer or confirmation, a message as JSON, a seal that does not open) is refused:
/// whoever may merely connect to the database can send it.
enum NodeChannelNotice: Equatable {
    case live(LinkFrames.Decoded)
    case queueChanged(token: String)
    case refused

    static func read(_ payload: String, channel: String, seal: NotifySeal) -> NodeChannelNotice {
        guard let first = payload.utf8.first else { return .refused }
        if first == NotifySeal.marker {
            guard let text = seal.open(payload, channel: channel), let live = LiveNotifier.decode(text) else { return .refused }
            return .live(live)
        }
        // A token: base64url and ":" only (a JSON object, a line break or a space is none).
        guard payload.utf8.allSatisfy(Self.isTokenByte) else { return .refused }
        return .queueChanged(token: payload)
    }

    private static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "."):
            return true
        default:
            return false
        }
    }
}
