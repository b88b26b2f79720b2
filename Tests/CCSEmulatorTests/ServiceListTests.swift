@testable import CCSEmulator
import Locking
import Logging
import NIOPosix
import ServiceLifecycle
import Testing

/// The stop order is declared once, by `ShutdownPhase`: a graceful stop, a start that failed before
/// the group ran, and a service that throws all stop the others in that order, one after the other.
@Suite struct ServiceListTests {
    final class Record: Sendable {
        private let events = Locked<[String]>([])
        func add(_ event: String) { events.withLock { $0.append(event) } }
        var all: [String] { events.withLock { $0 } }
        var stops: [String] { all.filter { $0.hasPrefix("stop ") }.map { String($0.dropFirst(5)) } }
    }

    /// A service that records when it runs and when it stops; it stops only once told to.
    struct Recorded: Service {
        let name: String
        let record: Record
        func run() async throws {
            record.add("run \(name)")
            try? await gracefulShutdown()
            // A stop that takes a moment: the next one must still wait for it.
            await Task.yield()
            record.add("stop \(name)")
        }
    }

    struct BindFailed: Error {}

    /// A listener whose bind fails once the group runs.
    struct FailingListener: Service {
        let record: Record
        func run() async throws {
            record.add("run failing")
            throw BindFailed()
        }
    }

    static let logger = Logger(label: "test.services")

    /// Added in an order unlike the phases' (as `Emulator.start` opens things), several in one phase.
    static func scrambled(_ record: Record) -> ServiceList {
        var list = ServiceList()
        list.add("lock", .releaseDataDirectory, Recorded(name: "lock", record: record))
        list.add("committer", .flushStore, Recorded(name: "committer", record: record))
        list.add("journal", .flushJournal, Recorded(name: "journal", record: record))
        list.add("ccs", .stopAccepting, Recorded(name: "ccs", record: record))
        list.add("device", .stopAccepting, Recorded(name: "device", record: record))
        list.add("loops", .stopEventLoops, Recorded(name: "loops", record: record))
        list.add("http", .stopHTTP, Recorded(name: "http", record: record))
        list.add("tick", .stopTimers, Recorded(name: "tick", record: record))
        list.add("drain", .drainConnections, Recorded(name: "drain", record: record))
        return list
    }

    static let declaredOrder = ["tick", "drain", "ccs", "device", "http", "committer", "journal", "loops", "lock"]

    @Test func theStopOrderIsThePhasesOrderAndWithinAPhaseTheOrderAdded() {
        let list = Self.scrambled(Record())
        #expect(list.stopOrder.map(\.name) == Self.declaredOrder)
        let phases = list.stopOrder.map(\.phase)
        #expect(phases == phases.sorted())
    }

    @Test func aGracefulStopStopsEveryServiceInTheDeclaredOrder() async throws {
        let record = Record()
        let group = Self.scrambled(record).makeGroup(logger: Self.logger)
        let running = Task { try await group.run() }
        // Every service runs before the stop is asked for, so the stop order is not an accident of start-up.
        while record.all.filter({ $0.hasPrefix("run ") }).count < Self.declaredOrder.count { await Task.yield() }
        #expect(record.stops.isEmpty)
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(record.stops == Self.declaredOrder)
    }

    @Test func aStartThatFailedBeforeTheGroupRanStopsWhatItOpenedInTheSameOrder() async {
        let record = Record()
        await Self.scrambled(record).stopAll(logger: Self.logger)
        #expect(record.stops == Self.declaredOrder)
    }

    @Test func aListenerThatCannotBindStopsTheOthersInTheDeclaredOrderAndItsErrorComesBack() async {
        let record = Record()
        var list = Self.scrambled(record)
        list.add("https", .stopHTTP, FailingListener(record: record))
        let group = list.makeGroup(logger: Self.logger)
        await #expect(throws: BindFailed.self) { try await group.run() }
        #expect(record.all.contains("run failing"))
        #expect(record.stops == Self.declaredOrder)
    }

    @Test func aLateListenerAdoptedAfterTheStopIsClosedAtOnce() async throws {
        let late = LateListener("--proxy-port")
        var list = ServiceList()
        list.add("--proxy-port", .stopAccepting, late)
        await list.stopAll(logger: Self.logger)
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        await late.adopt(listener)
        try await listener.closeFuture.get()
        #expect(!listener.isActive)
    }
}
