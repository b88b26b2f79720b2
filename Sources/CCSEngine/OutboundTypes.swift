import DeliveryCore
import PushDomain
import StoreModel

extension Engine {
    /// The host's half of an app-server connection: what the router (`OutboundRouter`, in
    /// DeliveryCore) does not hold because it is I/O or only the admin view reads it.
    struct AppServerHost {
        var info: AppServerConnectionInfo
        let link: any AppServerLink
    }

    /// The host's half of a live upstream write (`OutboundRouter.goLive`): its ticket, which only the
    /// host may cancel (`WriteTicket.cancel` takes the committer's lock), and the device's answer.
    struct LiveUpstream {
        let ticket: WriteTicket
        let settle: @Sendable (UpstreamOutcome) -> Void
    }

    /// What the host does after the lock for the router's effects (`Engine.apply`), in their order.
    enum OutboundAction {
        case send([Send])
        case writeLive(OutboundRecord, UpstreamWriteID, LiveUpstream)
        case answer(@Sendable (UpstreamOutcome) -> Void, UpstreamOutcome)
        case release([OutboundRecord])
        case claim(String)
        case queueFull(sender: String, count: Int)
        case drop(OutboundRecord, UpstreamError)
    }
}
