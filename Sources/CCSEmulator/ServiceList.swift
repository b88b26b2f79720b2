import Logging
import ServiceLifecycle

/// The order in which a running emulator stops, declared once. Every part of a running emulator is a
/// service of one `ServiceGroup` and names its phase; the group stops its services one after the
/// other, each only once the one before it has returned, in these phases' order. A start that fails
/// half-way stops what it made through the same list (`ServiceList.stopAll`), so the order of a
/// failed start and of a graceful stop cannot drift apart.
enum ShutdownPhase: Int, CaseIterable, Comparable, Sendable {
    /// The engine's 1-second tick (expiry, ACK timeouts) and the memory trimmer.
    case stopTimers
    /// The APNs listeners close; each gateway connection learns the last identifier taken (status 10)
    /// and each HTTP/2 connection answers `Shutdown`, while the engine still takes what came before.
    case stopAPNs
    /// CONNECTION_DRAINING to every app server, and a wait (`shutdown(maxWait:)`) for the downstream
    /// messages still being answered.
    case drainConnections
    /// The CCS, device-channel and proxy listeners close: no new connection.
    case stopAccepting
    /// Every app-server and device connection left ends (`</stream:stream>`, then close); web push
    /// stops sending.
    case closeConnections
    /// The journal's event streams end (they never end by themselves), then the HTTP servers stop
    /// gracefully (requests in flight are answered).
    case stopHTTP
    /// This node leaves the cluster: the other nodes take over its devices at once, not after its lease.
    case leaveCluster
    /// The virtual clock's time is saved and the writer commits what it still holds; before the event
    /// loops stop, since its last completions still hop to them.
    case flushStore
    /// The journal writes what it holds and closes.
    case flushJournal
    /// `--export-on-exit` (after a start that finished), from the store everything was committed to.
    case exportState
    /// The PostgreSQL connections close.
    case closeStore
    /// The emulator's own event loops (not `SharedHTTPLoops`).
    case stopEventLoops
    /// The data directory's lock: another server may open it from here on.
    case releaseDataDirectory

    static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// The services of one emulator, each with the phase it stops in; it builds the `ServiceGroup` whose
/// array order gives that stop order.
struct ServiceList: Sendable {
    struct Entry: Sendable {
        var name: String
        var phase: ShutdownPhase
        var service: any Service
    }

    private(set) var entries: [Entry] = []

    /// Adds a service; within a phase, services stop in the order they were added.
    mutating func add(_ name: String, _ phase: ShutdownPhase, _ service: any Service) {
        entries.append(Entry(name: name, phase: phase, service: service))
    }

    /// The services in the order they stop.
    var stopOrder: [Entry] {
        entries.enumerated()
            .sorted { ($0.element.phase, $0.offset) < ($1.element.phase, $1.offset) }
            .map(\.element)
    }

    /// One group for all of them. The group stops its services last to first, so the array is the stop
    /// order reversed. A service that throws (a listener that cannot bind) stops the group gracefully,
    /// in the same order, instead of cancelling everything at once.
    func makeGroup(logger: Logger) -> ServiceGroup {
        let services = stopOrder.reversed().map {
            ServiceGroupConfiguration.ServiceConfiguration(
                service: $0.service, successTerminationBehavior: .gracefullyShutdownGroup,
                failureTerminationBehavior: .gracefullyShutdownGroup, serviceName: $0.name)
        }
        return ServiceGroup(configuration: .init(services: services, logger: logger))
    }

    /// Stops every service in the declared order, for a start that failed before the group ran: the
    /// group is asked to stop before it runs, so it starts each service and stops it at once.
    func stopAll(logger: Logger) async {
        let group = makeGroup(logger: logger)
        await group.triggerGracefulShutdown()
        try? await group.run()
    }
}
