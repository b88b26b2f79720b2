import Testing
@testable import APNsProviderAPI

@Suite struct ProviderConnectionTests {
    let maker = TokenMaker()
    let now: Int64 = 1_800_000_000

    func authorize(_ c: inout ProviderConnection, _ header: String?, at t: Int64? = nil,
                   environment: ProviderEnvironment = .sandbox, keys: TokenMaker? = nil) -> ProviderConnection.Decision {
        let lookup = keys ?? maker
        return c.authorize(header, environment: environment, nowSeconds: t ?? now, keys: lookup.lookup)
    }

    @Test func streamsOpenAtTheFirstVerifiedTokenOnly() {
        var c = ProviderConnection(method: .token)
        #expect(!c.streamsOpen)
        #expect(authorize(&c, nil).outcome == .failure(.missingProviderToken))
        #expect(authorize(&c, "bearer x.y.z").outcome == .failure(.invalidProviderToken))
        #expect(!c.streamsOpen)
        let token = "bearer " + maker.token(iat: now)
        let first = authorize(&c, token)
        #expect(first.outcome == .success(.token(maker.key)) && first.opensStreams)
        let second = authorize(&c, token)
        #expect(second.outcome == .success(.token(maker.key)) && !second.opensStreams)
        #expect(c.teamID == "TEAM000001")
    }

    @Test func theSameTokenExpiresAfterAnHour() {
        var c = ProviderConnection(method: .token)
        let token = "bearer " + maker.token(iat: now)
        _ = authorize(&c, token)
        #expect(authorize(&c, token, at: now + 3600).outcome == .success(.token(maker.key)))
        #expect(authorize(&c, token, at: now + 3601).outcome == .failure(.expiredProviderToken))
    }

    @Test func updatesAtMostEvery20MinutesAndOneTeam() {
        var c = ProviderConnection(method: .token)
        _ = authorize(&c, "bearer " + maker.token(iat: now))
        #expect(authorize(&c, "bearer " + maker.token(iat: now + 60), at: now + 60).outcome
                == .failure(.tooManyProviderTokenUpdates))
        #expect(authorize(&c, "bearer " + maker.token(iat: now + 1200), at: now + 1200).outcome
                == .success(.token(maker.key)))
        let other = TokenMaker(keyID: "KEY0000002", teamID: "TEAM000002")
        #expect(authorize(&c, "bearer " + other.token(iat: now + 2500), at: now + 2500, keys: other).outcome
                == .failure(.invalidProviderToken))
    }

    @Test func aKeysEnvironmentIsEnforced() {
        let sandbox = TokenMaker(environment: .sandbox)
        var c = ProviderConnection(method: .token)
        #expect(authorize(&c, "bearer " + sandbox.token(iat: now), environment: .production, keys: sandbox).outcome
                == .failure(.badEnvironmentKeyInToken))
        #expect(ProviderEnvironment(authority: "api.push.apple.com:443") == .production)
        #expect(ProviderEnvironment(authority: "api.sandbox.push.apple.com") == .sandbox)
        #expect(ProviderEnvironment(authority: "localhost:2197") == .sandbox)
    }

    @Test func certificatesIgnoreTokens() {
        var c = ProviderConnection(method: .certificate(.init(bundleID: "com.example.app", sandboxOnly: true)))
        #expect(c.streamsOpen)
        #expect(authorize(&c, "bearer nonsense").outcome == .success(.certificate(bundleID: "com.example.app")))
        #expect(authorize(&c, nil, environment: .production).outcome == .failure(.badCertificateEnvironment))
        var noUID = ProviderConnection(method: .certificate(.init(bundleID: nil, sandboxOnly: false)))
        #expect(authorize(&noUID, nil).outcome == .failure(.badCertificate))
    }
}
