import PushDomain
import StoreModel

/// An outbound item on a connection's window, with when it was written there.
package struct SentOutbound {
    package var record: OutboundRecord
    package var sentAt: Int64

    package init(record: OutboundRecord, sentAt: Int64) {
        self.record = record
        self.sentAt = sentAt
    }
}

/// An outbound item is one device's: two devices may use the same upstream message id, and an
/// app server may reuse a message id (and so a receipt id) for two devices.
package struct OutboundKey: Hashable {
    package var kind: OutboundKind
    package var token: String
    package var messageID: String

    package init(kind: OutboundKind, token: String, messageID: String) {
        self.kind = kind
        self.token = token
        self.messageID = messageID
    }
}

extension OutboundRecord {
    package var key: OutboundKey { OutboundKey(kind: kind, token: token, messageID: messageID) }
}

/// A device's upstream messages to one sender.
package struct UpstreamHolder: Hashable {
    package var sender: String
    package var token: String

    package init(sender: String, token: String) {
        self.sender = sender
        self.token = token
    }
}

/// The core's name for the write of an upstream message that went out before it was written (a live
/// upstream, Engine+Outbound.swift). The host keeps what belongs to the write (its ticket and the
/// device's answer) under this id; the core keeps only the id, so it holds no I/O object.
package struct UpstreamWriteID: Hashable, Sendable {
    package let value: UInt64
}

/// One bound app-server connection as the router sees it: its sender, whether it drains, and its
/// window. The connection itself (its link, its address) is the host's.
package struct ConnectionEntry {
    package let senderID: String
    /// The host's link started draining (it sent CONNECTION_DRAINING): the connection takes no new
    /// outbound traffic. Never cleared: a draining connection only closes.
    package internal(set) var draining: Bool
    /// Upstream messages and receipts written to this connection and not yet ACKed.
    package internal(set) var inFlight: [OutboundKey: SentOutbound] = [:]

    init(senderID: String, draining: Bool = false) {
        self.senderID = senderID
        self.draining = draining
    }

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
