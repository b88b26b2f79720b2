import PostgresStore

/// 127.0.0.0/8, ::1 and localhost: the addresses only this machine reaches.
extension Emulator {
    /// What a configuration would open beyond this machine, refused before anything is bound
    /// (docs/hardening.md, "Threat model").
    static func checkExposure(_ config: EmulatorConfiguration) throws {
        if config.adminToken == nil, !isLoopback(config.bindHost) {
            throw ConfigurationError("--bind \(config.bindHost) would open the admin API (devices, faults, the clock, reset) beyond this machine: give --admin-token TOKEN (clients send Authorization: Bearer TOKEN; the device, send and bench commands read CCS_ADMIN_TOKEN), or bind 127.0.0.1")
        }
        if !isLoopback(config.bindHost), config.authMode != .strict, !config.openFCMAPIsWithoutAuth {
            throw ConfigurationError("--bind \(config.bindHost) would open the FCM APIs (CCS, /fcm/send, HTTP v1) to anyone on the network with any key: give --auth strict (with --config naming the senders and keys), or --open-fcm-apis-without-auth to accept that, or bind 127.0.0.1")
        }
        for name in config.publicHosts where !HostPolicy.isValidName(name) {
            throw ConfigurationError("--public-host \(name): give a host name or address as clients write it in Host (no scheme, port or path)")
        }
        if let token = config.adminToken, token.utf8.count < 16 || !token.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) {
            throw ConfigurationError("--admin-token must be at least 16 printable characters without spaces")
        }
    }

    /// `--store`'s URL, with the password from `--store-password-file` or PGPASSWORD when it has none.
    static func storeURL(_ config: EmulatorConfiguration) throws -> PostgresURL? {
        do {
            return try config.storeURL.map { text in
                var url = try PostgresURL(parsing: text)
                if url.password == nil { url.password = config.storePassword }
                return url
            }
        } catch {
            throw ConfigurationError("\(error)")
        }
    }
}

func isLoopback(_ host: String) -> Bool {
    host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
}
