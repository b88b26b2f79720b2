import CCSEngine
import Logging

/// What every stream of the listener uses: the engine, the keys, the log.
struct ProviderServices: Sendable {
    let engine: Engine
    let keys: ProviderKeyStore
    let logger: Logger
}
