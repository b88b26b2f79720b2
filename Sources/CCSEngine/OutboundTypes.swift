import DeliveryCore
import StoreModel
import PushDomain

extension Engine {
    struct SentOutbound {
        var record: OutboundRecord
        var sentAt: Int64
    }

    /// An outbound item is one device's: two devices may use the same upstream message id, and an
    /// app server may reuse a message id (and so a receipt id) for two devices.
    struct OutboundKey: Hashable {
        var kind: OutboundKind
        var token: String
        var messageID: String
    }

    /// A device's upstream messages to one sender.
    struct UpstreamHolder: Hashable {
        var sender: String
        var token: String
    }

    struct ConnectionEntry {
        var info: AppServerConnectionInfo
        let link: any AppServerLink
        /// Upstream messages and receipts written to this connection and not yet ACKed.
        var inFlight: [OutboundKey: SentOutbound] = [:]

        /// The in-flight item an app server's ACK of `messageID` (receipts with or without `dr2:`)
        /// means: the one from the device named by `to` when there is one, else the oldest with that id
        /// (a receipt's ACK carries no device; same-id receipts are then ACKed oldest first).
        func acknowledged(messageID: String, to: String?) -> OutboundKey? {
            if let to, inFlight[OutboundKey(kind: .upstream, token: to, messageID: messageID)] != nil {
                return OutboundKey(kind: .upstream, token: to, messageID: messageID)
            }
            let receiptID = DeliveryReceipt.messageIDPrefix + messageID
            var best: (key: OutboundKey, sent: SentOutbound)?
            for (key, sent) in inFlight where key.messageID == messageID || key.messageID == receiptID {
                if key.token == to { return key }
                if best == nil || (sent.sentAt, sent.record.createdAt) < (best!.sent.sentAt, best!.sent.record.createdAt) {
                    best = (key, sent)
                }
            }
            return best?.key
        }
    }

    struct LiveUpstream {
        let ticket: WriteTicket
        let settle: @Sendable (UpstreamOutcome) -> Void
    }
}
