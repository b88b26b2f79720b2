// The JSON value type and the canonical message live in the protocol-neutral domain; every user of
// the CCS codec needs them, so importing CCSProtocol brings them along.
@_exported import PushDomain
