import PushDomain

/// The JSON bodies the store keeps for messages on their way out: an app server's upstream messages
/// and delivery receipts (`OutboundRecord.json`) and the `send_error` notice queued for a device whose
/// upstream message was given up (`QueuedMessage.payload`).
///
/// These are stored formats: data directories written by older versions hold exactly these bytes,
/// and the export format carries them. They are also, byte for byte, the bodies CCS sends (Google's
/// documentation layout, compact, keys in its order), so the XMPP roles send a stored body as it is.
/// The engine builds them from domain values here, never from the CCS codec (docs/architecture.md,
/// "Wire formats at the edges").
public enum StoredJSON {
    /// `{"category":…,"data":{…},"message_id":…,"from":…}` plus `"time_to_live"` when given. Data keys
    /// are sorted. A message the device addressed to a device group also carries `"to"` (the key as
    /// the device wrote it) and `"notification_key_name"`.
    public static func upstream(_ message: UpstreamMessage) -> String {
        var writer = JSONObjectWriter()
        writer.add("category", message.category)
        writer.add("data", stringMap: message.data)
        writer.add("message_id", message.messageID)
        writer.add("from", message.from)
        if let timeToLive = message.timeToLive { writer.add("time_to_live", timeToLive) }
        if let group = message.group {
            writer.add("to", group.key)
            writer.add("notification_key_name", group.name)
        }
        return writer.finished()
    }

    /// `{"category":…,"data":{"message_status":…,"original_message_id":…,"device_registration_id":…,"message_sent_timestamp":"<ms>"},"message_id":"dr2:<orig>","message_type":"receipt","from":"gcm.googleapis.com"}`;
    /// `category` and the timestamp are left out when nil.
    public static func receipt(_ receipt: DeliveryReceipt) -> String {
        var data = JSONObjectWriter()
        data.add("message_status", receipt.messageStatus)
        data.add("original_message_id", receipt.originalMessageID)
        data.add("device_registration_id", receipt.deviceRegistrationID)
        if let sent = receipt.sentTimestampMillis { data.add("message_sent_timestamp", String(sent)) }
        var writer = JSONObjectWriter()
        if let category = receipt.category { writer.add("category", category) }
        writer.add("data", rawJSON: data.finished())
        writer.add("message_id", receipt.messageID)
        writer.add("message_type", "receipt")
        writer.add("from", DeliveryReceipt.sender)
        return writer.finished()
    }

    /// The notice a device gets through its queue when its upstream message is given up:
    /// `{"error":…,"message_id":…,"message_type":"send_error"}` (keys sorted).
    public static func sendError(messageID: String, error: UpstreamError) -> String {
        JSONValue.object(["message_type": .string("send_error"), "message_id": .string(messageID),
                          "error": .string(error.rawValue)]).encoded()
    }
}
