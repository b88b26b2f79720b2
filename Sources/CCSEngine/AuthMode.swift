import DeliveryCore
public enum AuthMode: String, Sendable, CaseIterable {
    /// Any all-digits sender ID with any non-empty key is accepted and provisioned.
    case permissive
    /// Only sender IDs and keys from the configuration file.
    case strict
}
