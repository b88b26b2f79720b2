import ServiceLifecycle

/// One Hummingbird server (plain or TLS) as a service of the emulator's group. Hummingbird binds when
/// the server runs, so the port comes back through `port`: bound (from `onServerRunning`), failed
/// (the error the server threw), or stopped before it bound.
struct HTTPListenerService: Service, CustomStringConvertible {
    let description: String
    let server: any Service
    let port: ListenerPort

    func run() async throws {
        do {
            try await server.run()
        } catch {
            port.settle(.failed(error))
            throw error
        }
        port.settle(.stopped)
    }
}
