@testable import CCSEmulator
import Foundation
import Logging
import NIOCore
import NIOPosix
import Testing

/// A start that cannot bind one listener closes the listeners already bound and releases the data
/// directory's lock: the same ports and the same data directory serve the next start.
@Suite(.serialized) struct EmulatorStartFailureTests {
    static func configuration(dataDirectory: String) -> EmulatorConfiguration {
        var c = EmulatorConfiguration()
        c.dataDirectory = dataDirectory
        c.ccsPort = 0
        c.devicePort = 0
        c.httpPort = 0
        c.apns.gatewayPort = 0
        c.apns.feedbackPort = 0
        c.apnsHTTP2.port = 0
        c.eventLoopThreads = 1
        return c
    }

    static var quiet: Logger {
        var logger = Logger(label: "test.emulator")
        logger.logLevel = .critical
        return logger
    }

    static func temporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ccs-start-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A port some other listener holds for as long as the test runs.
    static func occupiedPort() async throws -> any Channel {
        try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 0)
            .bind(host: "127.0.0.1", port: 0).get()
    }

    /// A free port, picked the way the emulator's ports are told in advance in these tests.
    static func freePort() async throws -> Int {
        let probe = try await occupiedPort()
        let port = probe.localAddress?.port ?? 0
        try await probe.close()
        return port
    }

    /// The port bound by a listener that binds before the group runs (the APNs gateway) is taken.
    @Test func aListenerBoundBeforeTheGroupFailsAndThoseBoundBeforeItAreClosed() async throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let taken = try await Self.occupiedPort()
        defer { taken.close(promise: nil) }
        var c = Self.configuration(dataDirectory: dir)
        c.ccsPort = try await Self.freePort()
        c.apns.gatewayPort = taken.localAddress?.port ?? 0
        await #expect(throws: ListenerError.self) { _ = try await Emulator.start(c, logger: Self.quiet) }
        // The CCS port bound before the failure, and the data directory, serve the next start.
        c.apns.gatewayPort = 0
        let emulator = try await Emulator.start(c, logger: Self.quiet)
        #expect(emulator.info.ccsPort == c.ccsPort)
        await emulator.shutdown()
    }

    /// The HTTP port, bound once the group runs, is taken: the group stops what the start bound.
    @Test func anHTTPListenerFailsInTheGroupAndEverythingBoundIsClosed() async throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let taken = try await Self.occupiedPort()
        defer { taken.close(promise: nil) }
        var c = Self.configuration(dataDirectory: dir)
        c.ccsPort = try await Self.freePort()
        c.httpPort = taken.localAddress?.port ?? 0
        do {
            _ = try await Emulator.start(c, logger: Self.quiet)
            Issue.record("started although --http-port was taken")
        } catch let error as ListenerError {
            #expect(error.description.contains("--http-port"))
            #expect(error.description.contains("already in use"))
        }
        c.httpPort = 0
        let emulator = try await Emulator.start(c, logger: Self.quiet)
        #expect(emulator.info.ccsPort == c.ccsPort)
        #expect(emulator.info.httpPort != 0)
        await emulator.shutdown()
        // After a graceful stop the lock is released too (not only once the emulator is deallocated).
        let again = try await Emulator.start(c, logger: Self.quiet)
        await again.shutdown()
        _ = emulator
    }

    /// The TLS server fails while the plain one binds: the error names the TLS server's option.
    @Test func theHTTPSListenerFailingIsNamedAlthoughThePlainOneBound() async throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let taken = try await Self.occupiedPort()
        defer { taken.close(promise: nil) }
        var c = Self.configuration(dataDirectory: dir)
        c.httpsPort = taken.localAddress?.port ?? 0
        do {
            _ = try await Emulator.start(c, logger: Self.quiet)
            Issue.record("started although --https-port was taken")
        } catch let error as ListenerError {
            #expect(error.description.contains("--https-port"))
        }
        c.httpsPort = 0
        let emulator = try await Emulator.start(c, logger: Self.quiet)
        #expect(emulator.httpsPort != nil)
        await emulator.shutdown()
    }
}
