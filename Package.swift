// swift-tools-version:6.1
// 6.1 for package traits: Hummingbird with FullFoundation only. Its default also enables
// ConfigurationSupport, whose two trait flags SwiftPM orders differently from run to run, so that a
// warm rebuild recompiled ~113 steps; without it a rerun of scripts/test builds nothing.
import PackageDescription

let package = Package(
    name: "ccs-emulator",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ccs-emulator", targets: ["ccs-emulator"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.30.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.10.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.3.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.0.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.5.0", traits: ["FullFoundation"]),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
        .package(url: "https://github.com/vapor/multipart-kit.git", from: "4.7.1"),
    ],
    targets: [
        .systemLibrary(name: "CExpat", path: "Sources/CExpat", pkgConfig: "expat",
                       providers: [.apt(["libexpat1-dev"])]),
        .target(name: "XMLStreaming", dependencies: ["CExpat"]),
        .target(name: "PushDomain"),
        .target(name: "CCSProtocol", dependencies: ["PushDomain"]),
        .target(name: "CCSStore", dependencies: [
            "PushDomain",
            .product(name: "GRDB", package: "GRDB.swift"),
        ]),
        .target(name: "CCSEngine", dependencies: [
            "PushDomain", "CCSProtocol", "CCSStore",
            .product(name: "DequeModule", package: "swift-collections"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .target(name: "XMPPServer", dependencies: [
            "XMLStreaming", "CCSProtocol", "CCSEngine", "CCSStore",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .target(name: "HTTPAPI", dependencies: [
            "CCSProtocol", "CCSEngine", "CCSStore",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "NIOCore", package: "swift-nio"),
        ]),
        .target(name: "GoogleAuth", dependencies: [
            "PushDomain",
            .product(name: "JWTKit", package: "jwt-kit"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "CryptoExtras", package: "swift-crypto"),
        ]),
        .target(name: "FCMHTTP", dependencies: [
            "PushDomain", "CCSProtocol", "CCSEngine", "GoogleAuth",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "MultipartKit", package: "multipart-kit"),
        ]),
        .target(name: "ConnectProxy", dependencies: [
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .target(name: "DeviceSimulator", dependencies: [
            "XMLStreaming", "CCSProtocol",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
        ]),
        .target(name: "CCSEmulator", dependencies: [
            "XMPPServer", "HTTPAPI", "FCMHTTP", "GoogleAuth", "ConnectProxy", "CCSEngine", "CCSStore", "CCSProtocol",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdCore", package: "hummingbird"),
            .product(name: "HummingbirdTLS", package: "hummingbird"),
        ]),
        .target(name: "LoadGenerator", dependencies: [
            "CCSProtocol", "DeviceSimulator",
            .product(name: "Histogram", package: "hdrhistogram-swift"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
        ]),
        .executableTarget(name: "ccs-emulator", dependencies: [
            "CCSEmulator", "DeviceSimulator", "LoadGenerator", "CCSEngine", "CCSProtocol", "CCSStore", "XMPPServer",
            "GoogleAuth",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        .testTarget(name: "XMLStreamingTests", dependencies: ["XMLStreaming"]),
        .testTarget(name: "CCSProtocolTests", dependencies: ["CCSProtocol"]),
        .testTarget(name: "CCSStoreTests", dependencies: ["CCSStore", "PushDomain", .product(name: "GRDB", package: "GRDB.swift")]),
        .testTarget(name: "CCSEngineTests", dependencies: ["CCSEngine", "CCSStore", "CCSProtocol"]),
        .testTarget(name: "LoadGeneratorTests", dependencies: [
            "LoadGenerator",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
        ]),
        .testTarget(name: "XMPPServerTests", dependencies: [
            "XMPPServer", "XMLStreaming", "CCSEngine", "CCSStore",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "DeviceSimulatorTests", dependencies: [
            "DeviceSimulator", "CCSProtocol",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
        ]),
        .testTarget(name: "CCSEmulatorTests", dependencies: [
            "CCSEmulator",
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
        ]),
        .testTarget(name: "HTTPAPITests", dependencies: [
            "HTTPAPI", "CCSEngine", "CCSStore", "CCSProtocol",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdTesting", package: "hummingbird"),
        ]),
        .testTarget(name: "ConnectProxyTests", dependencies: [
            "ConnectProxy",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
        ]),
        .testTarget(name: "GoogleAuthTests", dependencies: [
            "GoogleAuth", "PushDomain",
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
        .testTarget(name: "FCMHTTPTests", dependencies: [
            "FCMHTTP", "GoogleAuth", "CCSEngine", "CCSStore", "CCSProtocol",
            .product(name: "JWTKit", package: "jwt-kit"),
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdTesting", package: "hummingbird"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
