/// One HTTP/2 connection to the provider API as APNs keeps it: one authentication method for its
/// life (a client certificate chosen at the handshake, else provider tokens), one team, the current
/// token and when it last changed, and whether the 1,000 streams Apple allows are open yet (one
/// stream until a token verified). Sans-I/O: a request's `authorization` in, a decision out.
public struct ProviderConnection: Sendable {
    /// Apple asks providers to refresh a token no more often than once every 20 minutes.
    public static let tokenUpdateIntervalSeconds: Int64 = 20 * 60
    public static let initialConcurrentStreams = 1
    public static let maximumConcurrentStreams = 1000

    public enum Method: Sendable, Equatable {
        case token
        /// A client certificate from the CA; `topic` is what its subject UID said.
        case certificate(CertificateIdentity)
    }

    /// What a provider certificate allows.
    public struct CertificateIdentity: Sendable, Equatable {
        public var bundleID: String?
        /// Development certificates ("Apple Development IOS Push Services") reach the sandbox only;
        /// the others both environments, as Apple's universal certificates do.
        public var sandboxOnly: Bool

        public init(bundleID: String?, sandboxOnly: Bool) {
            self.bundleID = bundleID
            self.sandboxOnly = sandboxOnly
        }
    }

    /// Who a request speaks for, once its authentication passed.
    public enum Authorization: Sendable, Equatable {
        case token(ProviderKey)
        case certificate(bundleID: String)
    }

    public struct Decision: Sendable, Equatable {
        public var outcome: Result<Authorization, ProviderReason>
        /// Send SETTINGS_MAX_CONCURRENT_STREAMS 1000: the connection's first token verified.
        public var opensStreams = false
    }

    public let method: Method
    public private(set) var teamID: String?
    private var currentToken: Substring?
    private var verified: ProviderToken?
    private var changedAt: Int64?
    public private(set) var streamsOpen: Bool

    public init(method: Method) {
        self.method = method
        // A certificate authenticated the connection at the handshake: nothing to wait for.
        if case .certificate = method { streamsOpen = true } else { streamsOpen = false }
    }

    /// The request's `authorization` header (nil: none) on a connection to `environment`.
    public mutating func authorize(_ authorization: String?, environment: ProviderEnvironment, nowSeconds: Int64,
                                   keys: (String) -> ProviderKey?) -> Decision {
        switch method {
        case .certificate(let identity):
            // A bearer token on a certificate connection is ignored, as APNs ignores it.
            guard let bundleID = identity.bundleID else { return Decision(outcome: .failure(.badCertificate)) }
            if identity.sandboxOnly && environment == .production {
                return Decision(outcome: .failure(.badCertificateEnvironment))
            }
            return Decision(outcome: .success(.certificate(bundleID: bundleID)))
        case .token:
            return authorizeToken(authorization, environment: environment, nowSeconds: nowSeconds, keys: keys)
        }
    }

    private mutating func authorizeToken(_ authorization: String?, environment: ProviderEnvironment,
                                         nowSeconds: Int64, keys: (String) -> ProviderKey?) -> Decision {
        guard let jwt = Self.bearer(authorization) else { return Decision(outcome: .failure(.missingProviderToken)) }
        if jwt == currentToken, let verified {
            if verified.isExpired(nowSeconds: nowSeconds) { return Decision(outcome: .failure(.expiredProviderToken)) }
            return accepted(verified, environment: environment)
        }
        let token: ProviderToken
        switch ProviderToken.verify(bearer: jwt, keys: keys, nowSeconds: nowSeconds) {
        case .failure(let reason): return Decision(outcome: .failure(reason))
        case .success(let t): token = t
        }
        // One team per connection: another team's token is not a valid one here.
        if let teamID, teamID != token.teamID { return Decision(outcome: .failure(.invalidProviderToken)) }
        if let changedAt, nowSeconds - changedAt < Self.tokenUpdateIntervalSeconds {
            return Decision(outcome: .failure(.tooManyProviderTokenUpdates))
        }
        teamID = token.teamID
        currentToken = Substring(String(jwt))  // a copy of its own, not a slice of the request's header
        verified = token
        changedAt = nowSeconds
        var decision = accepted(token, environment: environment)
        if case .success = decision.outcome, !streamsOpen {
            streamsOpen = true
            decision.opensStreams = true
        }
        return decision
    }

    private func accepted(_ token: ProviderToken, environment: ProviderEnvironment) -> Decision {
        guard token.key.environment.allows(environment) else { return Decision(outcome: .failure(.badEnvironmentKeyInToken)) }
        return Decision(outcome: .success(.token(token.key)))
    }

    /// `bearer <JWT>` (the scheme in any case, as HTTP allows); nil when there is none.
    static func bearer(_ header: String?) -> Substring? {
        guard let header else { return nil }
        let trimmed = header.drop { $0 == " " }
        guard trimmed.count > 7, trimmed.prefix(7).lowercased() == "bearer " else { return nil }
        let jwt = trimmed.dropFirst(7).drop { $0 == " " }
        return jwt.isEmpty ? nil : jwt
    }
}
