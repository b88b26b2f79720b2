/// The commands of Apple's legacy binary provider interface (spec apns-legacy §2).
public enum APNsCommand: UInt8, Sendable, CaseIterable {
    /// `0`: the "simple" format (token, payload). Errors get no answer: the connection is closed.
    case simple = 0
    /// `1`: the "enhanced" format (identifier, expiry, token, payload).
    case enhanced = 1
    /// `2`: a frame of items (token, payload, identifier, expiry, priority).
    case frame = 2
    /// `8`: the error response the gateway writes before it closes.
    static let errorResponse: UInt8 = 8
}

/// The status byte of an error response (Apple's Table A-4, spec apns-legacy §3.2).
public enum APNsStatus: UInt8, Sendable, CaseIterable {
    case noErrors = 0
    /// The engine could not take the notification (the store failed): try again.
    case processingError = 1
    case missingDeviceToken = 2
    /// The provider certificate names no topic (no subject UID).
    case missingTopic = 3
    case missingPayload = 4
    case invalidTokenSize = 5
    /// The certificate's topic (bundle id) is empty or longer than 255 bytes.
    case invalidTopicSize = 6
    case invalidPayloadSize = 7
    /// No registration has the token, or it belongs to another app.
    case invalidToken = 8
    /// The server is going down; the identifier is the last notification processed.
    case shutdown = 10
    /// The frame could not be parsed (an item runs past the frame's end, a frame too long to be one).
    case protocolError = 128
    /// Missing, duplicate or unknown item, an item of the wrong size, a priority other than 5 or 10.
    case unknown = 255

    /// The 6-byte error response: `8`, status, identifier (the provider's 4 bytes, echoed).
    public func errorResponse(identifier: UInt32) -> [UInt8] {
        [APNsCommand.errorResponse, rawValue,
         UInt8(truncatingIfNeeded: identifier >> 24), UInt8(truncatingIfNeeded: identifier >> 16),
         UInt8(truncatingIfNeeded: identifier >> 8), UInt8(truncatingIfNeeded: identifier)]
    }
}
