import DeliveryCore
import FaultInjection
import PushDomain
import StoreModel

/// What happens to messages, as the engine reports it to its observers (the message journal and the
/// metrics, `Engine.observers`): the engine states each fact once and knows nothing of who listens;
/// each observer keeps what it needs of it, in the manner of Prosody's hooks (docs/architecture.md).
public enum DeliveryEvent: Sendable {
    /// The answers to one send request, one per result; `refusals[i]` is result i's refusal in the
    /// front end's own words (a NACK code, an HTTP error), nil for a result that is not one.
    case answered(SendRequest, [SendResult], refusals: [String?])
    /// A front end refused a message before it reached the engine (bad JSON, a draining connection).
    case refusedAtEdge(EdgeRefusal)
    /// A step of one stored message's life.
    case message(MessageStep, QueuedMessage, token: String?, detail: String?)
    /// A receipt about `aboutMessageID` was written to an app-server connection, or ACKed on it.
    case receipt(ReceiptStep, aboutMessageID: String, sender: String, token: String, connection: String)
    /// The user tapped a tray entry.
    case tapped(deviceMessageID: String, token: String)
    /// A topic or group message was written for `devices` devices at once.
    case fannedOut(QueuedMessage, topic: String?, devices: Int)
    /// Messages written to a device connection.
    case handedOver([DeviceDelivery], Platform)
    /// An upstream message or a receipt written to an app-server connection.
    case outboundSent(OutboundKind)
    /// From a send request's arrival at the engine to its answer.
    case sendTook(SendAPI, nanoseconds: Int64)
    /// The store took messages out of queues (collapse, the limits, expiry), reported after their
    /// commit and before its completions; `batchEnded` follows the completions.
    case removed([QueueRemoval])
    case batchEnded
    /// One transaction of the store: how many operations, and how long its commit took.
    case committed(ops: Int, nanoseconds: UInt64)
    /// A fault rule acted.
    case faultApplied(FaultLogEntry)
    /// What an app server did, as its front end saw it.
    case appServer(AppServerEvent)
    /// A notification the APNs gateway accepted or rejected, one a device confirmed, or a feedback tuple.
    case apns(APNsActivity.Entry)

    /// The steps of a message's life the engine reports as they happen.
    public enum MessageStep: Sendable {
        case stored, throttled, handedOver, deviceAcked, shownInTray
    }

    public enum ReceiptStep: Sendable {
        case sent, acked
    }
}

/// A message a front end refused before it reached the engine.
public struct EdgeRefusal: Sendable {
    public var api: SendAPI
    public var sender: String?
    public var token: String?
    public var topic: String?
    public var connection: String?
    public var clientMessageID: String?
    public var detail: String
}

/// One listener to the engine's events. Called on the thread that made the event, outside the
/// engine's lock or inside it (a hand-over journals under it): an observer never calls the engine.
public protocol DeliveryObserver: Sendable {
    func observe(_ event: DeliveryEvent)
}
