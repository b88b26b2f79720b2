import DeliveryCore
import PushDomain
import StoreModel
import PlatformRendering

/// What each platform's device is shown: a stored message rendered for the device it is handed to.
extension Engine {
    /// The platform's view of a queued message as JSON text; nil for the service's notices, which
    /// every platform gets as they are.
    static func platformView(of m: QueuedMessage, platform: Platform, app: String, appInBackground: Bool) -> String? {
        renderedView(of: m, platform: platform, app: app, appInBackground: appInBackground)?.encoded()
    }

    private static func renderedView(of m: QueuedMessage, platform: Platform, app: String, appInBackground: Bool) -> JSONValue? {
        guard m.kind == .message else { return nil }
        let delivered = DeliveredMessage(payloadJSON: m.payload, platformBlocksJSON: m.platformBlocks,
                                         acceptedAtMillis: m.enqueuedAt, app: app, appInBackground: appInBackground)
        return PlatformView.render(delivered, for: platform)
    }

    /// The view a device would get for this queued message now (its platform, its app's state):
    /// what the admin API shows beside the payload.
    public func platformView(of m: QueuedMessage) -> JSONValue? {
        guard let device = device(token: m.token) else { return nil }
        let background = !(deviceState(token: m.token)?.foreground ?? true)
        return Self.renderedView(of: m, platform: device.platform, app: device.app, appInBackground: background)
    }
}
