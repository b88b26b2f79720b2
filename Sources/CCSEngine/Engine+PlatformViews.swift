import DeliveryCore
import PushDomain
import StoreModel
import PlatformRendering

/// What each platform's device is shown: a stored message rendered for the device it is handed to.
extension Engine {
    /// The view a device would get for this queued message now (its platform, its app's state):
    /// what the admin API shows beside the payload.
    public func platformView(of m: QueuedMessage) -> JSONValue? {
        guard let device = device(token: m.token) else { return nil }
        let background = !(deviceState(token: m.token)?.foreground ?? true)
        return DeliveryCore.renderedView(of: m, platform: device.platform, app: device.app, appInBackground: background)
    }
}
