// `tokensignin serve`: wires the configuration, Google's key cache and the FastCGI server together.
import FastCGI
import GoogleKeys
import IDToken
import Logging
import Sessions
import SignIn

public enum Serve {
    /// Runs the responder until SIGTERM/SIGINT (graceful: in-flight requests finish). Throws at start-up
    /// for a setting that cannot work (naming it), or when the server fails.
    /// - Parameter fileMode: a file's permission bits (the key file's are checked), nil when it cannot be read.
    public static func run(_ configuration: Configuration, log: Log, clock: @escaping @Sendable () -> Int64,
                           fileMode: @Sendable (String) -> UInt32? = { _ in nil }, metrics: Metrics = Metrics()) throws(CommandError) {
        try configuration.requireTrustedKeys()
        try configuration.requireUnwritableKeyFile(fileMode: fileMode)
        let server: Server
        do {
            server = try Server(listen: configuration.listen, lanes: lanes(configuration),
                                limits: Limits(maxBodyBytes: Configuration.maxBodyBytes, requestTimeout: configuration.requestTimeout),
                                scheduling: configuration.workerScheduling)
            // Before any other thread exists, so every thread inherits the blocked signals.
            try server.stopOnTerminationSignals()
        } catch {
            throw CommandError(.invalidConfiguration, "TOKENSIGNIN_LISTEN: cannot listen on \(configuration.listen): \(error.detail)")
        }

        let keys: KeyCache
        var settings = KeyCache.Settings()
        settings.maxWait = configuration.keyWait
        if let file = configuration.jwksFile {
            keys = KeyCache(source: .file(file))
            do {
                _ = try keys.currentKeys()
            } catch {
                throw CommandError(.invalidConfiguration, "TOKENSIGNIN_JWKS_FILE: cannot load a key set from \(file): \(error.code.name) \(error.detail)")
            }
        } else {
            keys = KeyCache(source: .url(configuration.jwksURL), settings: settings)
            keys.start()
        }
        // Google's RISC configuration, read in the background (start-up never waits on it), then daily.
        let risc: RiscConfigurationMonitor? = switch configuration.riscConfiguration {
        case .off: nil
        case .url(let url):
            RiscConfigurationMonitor(url: url, expectedJWKS: configuration.jwksURL, tokenKeys: keys, keySettings: settings) { outcome, status in
                reportRiscConfiguration(outcome, status, expectedJWKS: configuration.jwksURL, log: log)
            }
        }
        risc?.start()

        // A database that is down at start-up is not fatal: requests get 503 until it is back.
        do {
            try Database.probe(conninfo: configuration.conninfo, pooler: configuration.databasePooler)
        } catch {
            // libpq's own words say what is wrong (a bad password, a misspelt database, an unknown parameter).
            log.warning("database_unavailable_at_start", ["code": error.code.name, "sqlstate": error.sqlState,
                                                          "detail": configuration.redacted(error.detail)])
        }

        if configuration.keySource != .google {
            log.warning("non_google_keys_trusted", ["source": configuration.keySource.kind, "location": configuration.keySource.location,
                                                    "detail": "tokens signed by this key set are trusted (\(Setting.allowNonGoogleKeys.variable)=1): development and tests only"])
        }
        if case .url(let url) = configuration.riscConfiguration, !configuration.riscConfiguration.isGoogle {
            log.warning("non_google_risc_configuration_trusted", ["location": url,
                                                                  "detail": "security events signed by the key set its jwks_uri names are trusted (\(Setting.allowNonGoogleKeys.variable)=1): development and tests only"])
        }
        let (cache, listener) = sessionCache(configuration, log: log)
        defer { listener?.stop() }
        log.info("started", ["version": Version.number, "build": Version.build,
                             "listen": server.address, "workers": String(configuration.workers),
                             "check_workers": String(configuration.checkWorkers),
                             "worker_scheduling": configuration.workerScheduling.rawValue,
                             "session_cache": cache == nil ? "off" : "on",
                             "client_ids": configuration.clientIDs.joined(separator: ","),
                             "risc_audiences": configuration.riscAudiences.joined(separator: ","),
                             "risc_configuration": configuration.riscConfiguration.description,
                             "keys": configuration.jwksFile ?? configuration.jwksURL])
        do {
            let service = Service(site: configuration.site, tokens: GoogleKeySets(idTokens: keys, risc: risc),
                                  keySource: configuration.keySource, log: log, clock: clock,
                                  metrics: metrics, samples: { [server] in samples(of: server) }, sessionCache: cache)
            try server.run(place: Routes.placement(of:), overloaded: { _ in overloadedResponse },
                           report: { event in reportFastCGI(event, log: log) },
                           makeHandler: { _ in
                               Application(service: service, store: PostgresStore(configuration, log: log, metrics: metrics))
                           })
        } catch {
            throw CommandError(.serverFailed, "the FastCGI server failed: \(error.code.name) \(error.detail)")
        }
        log.info("stopped", [:])
    }

    /// The session cache and its listener, started, when the settings turn it on and it can listen (a direct
    /// connection: behind a transaction pooler only with `TOKENSIGNIN_SESSION_CACHE_DATABASE_URL`).
    static func sessionCache(_ configuration: Configuration, log: Log) -> (SessionCache?, CacheListener?) {
        guard configuration.sessionCache else { return (nil, nil) }
        guard let conninfo = configuration.sessionCacheConninfo else {
            log.warning("session_cache_off", ["detail": "\(Setting.databasePooler.variable)=transaction and no \(Setting.sessionCacheDatabaseURL.variable): LISTEN needs a direct connection; every check asks PostgreSQL"])
            return (nil, nil)
        }
        let cache = SessionCache(capacity: configuration.sessionCacheSize, idleTimeout: configuration.sessionPolicy.idleTimeout)
        let listener = CacheListener(cache: cache, conninfo: conninfo, log: log, redact: { [configuration] in configuration.redacted($0) })
        guard listener.start() else {
            log.warning("session_cache_off", ["detail": "no thread for its listener; every check asks PostgreSQL"])
            return (nil, nil)
        }
        return (cache, listener)
    }

    /// The lanes the route table places requests on, sized by the settings.
    static func lanes(_ configuration: Configuration) -> [Lane] {
        Routes.lanes(workers: configuration.workers, checkWorkers: configuration.checkWorkers, signInBatch: configuration.signInBatch)
    }

    /// What the FastCGI server answers itself when a lane's queue is full or a request waited too long.
    static let overloadedResponse = Failure(.temporarilyUnavailable, "the service is busy; try again shortly", reason: "overloaded",
                                            headers: [("Retry-After", "1")]).response

    /// The server's gauges and counters for `/metrics`.
    static func samples(of server: Server) -> [Metrics.Sample] {
        var samples = server.laneUsage.flatMap { lane in [
            Metrics.Sample(name: "tokensignin_busy_workers", help: "Requests running, by lane (checks never wait for sign-ins).",
                           labels: [("lane", lane.name)], value: Double(lane.running)),
            Metrics.Sample(name: "tokensignin_lane_capacity", help: "Requests a lane may run at once.",
                           labels: [("lane", lane.name)], value: Double(lane.workers)),
            Metrics.Sample(name: "tokensignin_queued_requests", help: "Requests waiting for their lane.",
                           labels: [("lane", lane.name)], value: Double(lane.waiting)),
        ] }
        let statistics = server.statistics
        for (name, help, value) in [
            ("connections_accepted", "FastCGI connections accepted from nginx.", statistics.connectionsAccepted),
            ("protocol_violations", "FastCGI connections closed for breaking the protocol or a limit.", statistics.protocolViolations),
            ("request_timeouts", "FastCGI connections closed because a request did not arrive in time.", statistics.timeouts),
            ("overloaded", "Requests answered 503 because their lane's queue was full or they waited too long.", statistics.overloaded),
            ("invalid_responses", "Answers replaced by a 500 because a header could not be sent.", statistics.invalidResponses),
            ("write_failures", "Answers that could not be written to nginx.", statistics.writeFailures),
        ] {
            samples.append(Metrics.Sample(name: "tokensignin_fastcgi_\(name)_total", help: help, type: "counter", value: Double(value)))
        }
        return samples
    }

    /// One line per read of Google's RISC configuration: an error when it names another issuer or jwks_uri than the
    /// receiver uses (and which keys `/risc` then verifies with), a warning when it could not be read.
    static func reportRiscConfiguration(_ outcome: RiscConfigurationMonitor.Outcome, _ status: RiscConfigurationMonitor.Status,
                                        expectedJWKS: String, log: Log) {
        switch outcome {
        case .matches:
            log.info("risc_configuration_checked", ["issuer": status.discovered?.issuer, "jwks_uri": status.discovered?.jwksURI])
        case .mismatch:
            log.error("risc_configuration_mismatch", [
                "issuer": status.discovered?.issuer, "issuer_accepted": String(!status.issuerMismatch),
                "jwks_uri": status.discovered?.jwksURI, "expected_jwks_uri": expectedJWKS,
                "risc_keys": status.securityEventKeysURL ?? "id_token_keys",
            ])
        case .failed(let failure):
            log.warning("risc_configuration_unavailable", ["detail": failure.description, "failures": String(status.failures)])
        }
    }

    /// One log line per connection the FastCGI layer closed, overload answer or replaced response (no request data).
    static func reportFastCGI(_ event: FastCGIError, log: Log) {
        switch event.code {
        case .overloaded: log.warning("overloaded", ["detail": event.detail])
        case .invalidResponse: log.error("invalid_response", ["detail": event.detail])
        case .schedulingRefused: log.warning("worker_scheduling_refused", ["detail": event.detail])
        default: log.warning("fastcgi_connection_closed", ["reason": event.code.name, "detail": event.detail])
        }
    }
}
