import PushDomain
import StoreModel
import PlatformRendering

/// A device's confirmation in the core: once the host has said whether the message's write was called
/// off (`confirm`, `remember`), what the confirmation means and what it writes.
extension DeliveryCore {
    /// How a confirmed message ends.
    package enum ConfirmationEnd: Equatable {
        /// Offered by another node before its write (never to the tray, no receipt: `mayOffer`):
        /// nothing of it is stored here; that node calls its write off, or announces the commit and
        /// this node then removes it (`take`).
        case confirmLive(node: String)
        /// Its write was called off: it never reaches the disk, and the answer to its sender is due now
        /// (the message is delivered: nothing is left to lose).
        case calledOff
        /// It is removed from the device's queue.
        case removed
    }

    /// What one confirmation writes, in one commit: the message's removal, its tray entry, its receipt.
    package struct ConfirmationWrites: Equatable {
        package var end: ConfirmationEnd
        package var ops: [StoreOp]
        /// The delivery receipt written with it: it goes to the sender's app servers once committed.
        package var receipt: OutboundRecord?
    }

    /// The device and app a confirmation needs (`confirmationWrites`), read in the critical section.
    package struct ConfirmingDevice: Equatable, Sendable {
        package var app: String
        package var platform: Platform
        package var apnsToken: String?
    }

    package func confirmingDevice(_ token: String) -> ConfirmingDevice? {
        registry.devices[token].map { ConfirmingDevice(app: $0.app, platform: $0.platform, apnsToken: $0.apnsToken) }
    }

    /// What confirming `entry` writes; pure, so the host may decide it outside its critical section
    /// (a tray entry renders the platform's view).
    package static func confirmationWrites(_ entry: InFlightDownstream, token: String, calledOff: Bool,
                                           device: ConfirmingDevice?, now: Int64) -> ConfirmationWrites {
        let m = entry.message
        var writes = ConfirmationWrites(end: .removed, ops: [], receipt: nil)
        if let node = entry.offeredBy {
            writes.end = .confirmLive(node: node)
        } else if calledOff {
            writes.end = .calledOff
        } else {
            writes.ops.append(.removeMessage(token: token, deviceMessageID: m.deviceMessageID))
        }
        if entry.toTray {
            let view = platformView(of: m, platform: device?.platform ?? .android, app: device?.app ?? "", appInBackground: true)
            writes.ops.append(.addToTray(TrayEntry(token: token, deviceMessageID: m.deviceMessageID, payload: m.payload,
                                                   shownAt: now, view: view)))
        }
        if m.deliveryReceiptRequested {
            let json = StoredJSON.receipt(.sentToDevice(category: device?.app, originalMessageID: m.appMessageID,
                                                        deviceRegistrationID: token, sentTimestampMillis: m.enqueuedAt))
            let receipt = OutboundRecord(senderID: m.senderID, kind: .receipt,
                                         messageID: DeliveryReceipt.messageIDPrefix + m.appMessageID, token: token,
                                         json: json, createdAt: now,
                                         expiresAt: now + Int64(Message.maximumTimeToLive) * 1000,
                                         aboutMessageID: m.deviceMessageID)
            writes.ops.append(.addOutbound(receipt))
            writes.receipt = receipt
        }
        return writes
    }

    /// The platform's view of a queued message as JSON text; nil for the service's notices, which
    /// every platform gets as they are.
    package static func platformView(of m: QueuedMessage, platform: Platform, app: String, appInBackground: Bool) -> String? {
        renderedView(of: m, platform: platform, app: app, appInBackground: appInBackground)?.encoded()
    }

    package static func renderedView(of m: QueuedMessage, platform: Platform, app: String, appInBackground: Bool) -> JSONValue? {
        guard m.kind == .message else { return nil }
        let delivered = DeliveredMessage(payloadJSON: m.payload, platformBlocksJSON: m.platformBlocks,
                                         acceptedAtMillis: m.enqueuedAt, app: app, appInBackground: appInBackground)
        return PlatformView.render(delivered, for: platform)
    }
}
