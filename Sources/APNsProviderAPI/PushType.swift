/// `apns-push-type`, and the topic each one is sent to ("Sending notification requests to APNs").
public enum PushType: String, Sendable, CaseIterable {
    case alert, background, voip, complication, fileprovider, mdm, liveactivity, location, pushtotalk, widgets

    /// The suffix Apple requires after the bundle id in `apns-topic` (nil: the bare bundle id).
    public var topicSuffix: String? {
        switch self {
        case .voip: return ".voip"
        case .complication: return ".complication"
        case .fileprovider: return ".pushkit.fileprovider"
        case .liveactivity: return ".push-type.liveactivity"
        case .location: return ".location-query"
        case .pushtotalk: return ".voip-ptt"
        case .widgets: return ".push-type.widgets"
        case .alert, .background, .mdm: return nil
        }
    }

    /// The bundle id a topic names: the topic without any of the suffixes (longest first).
    public static func bundleID(ofTopic topic: String) -> (bundleID: String, suffix: String?) {
        let suffixes = allCases.compactMap(\.topicSuffix).sorted { $0.count > $1.count }
        for suffix in suffixes where topic.hasSuffix(suffix) && topic.count > suffix.count {
            return (String(topic.dropLast(suffix.count)), suffix)
        }
        return (topic, nil)
    }

    /// Apple: 4 KB for a notification, 5 KB for a VoIP one.
    public var payloadLimit: Int { self == .voip ? 5120 : 4096 }
}
