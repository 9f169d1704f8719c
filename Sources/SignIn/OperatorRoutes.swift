// GET /readyz and /metrics: what the operators' probes and Prometheus read (`/healthz` is its row in the table).
import FastCGI
import GoogleKeys
import Sessions
import struct Store.StoreError

extension Application {
    /// `200` when this worker's database connection answers and may write, a key set is loaded and not stale, and
    /// the session cache (when on) can be trusted (`Readiness.trusts`); `503` with the reasons otherwise (never a 200
    /// that a load balancer would trust wrongly), each counted in `tokensignin_not_ready_total`. A read-only database
    /// (a standby after a failover) also makes the worker let its connection go, so the next statement looks for the
    /// primary again (`PostgresStore.ping`). `warnings` lists what an operator should look at without taking
    /// sign-ins out of the load balancer: a drifted RISC configuration (docs/risc.md).
    func ready() throws -> Response {
        var reasons: [NotReadyReason] = []
        do {
            try store.ping()
        } catch let error as StoreError {
            reasons.append(error.isReadOnlyServer ? .databaseReadOnly : error.isRetryable ? .databaseUnavailable : .databaseFault)
        }
        // Keys due for a refresh get one now, in the background: the probe keeps an idle responder's keys fresh, and
        // brings back one whose stale keys took it out of its load balancer (where no sign-in would).
        tokens.refreshIfDue()
        let keys = tokens.keyReadiness
        if !keys.loaded { reasons.append(.keysNotLoaded) } else if keys.stale { reasons.append(.keysStale) }
        if let cache = service.sessionCache, !service.readiness.trusts(cache) { reasons.append(.sessionCacheUnusable) }
        service.readiness.record(reasons)
        // Where the keys come from, so a responder trusting a development key set is seen at once.
        var keySource: [(String, JSONValue)] = [("kind", .string(service.keySource.kind))]
        if service.keySource != .google { keySource.append(("location", .string(service.keySource.location))) }
        let warnings: [(String, JSONValue)] = keys.riscConfiguration?.mismatch == true
            ? [("warnings", .array([.string("risc_configuration_mismatch")]))] : []
        guard reasons.isEmpty else {
            return .json(status: 503, .object([("status", .string("unavailable")),
                                               ("reasons", .array(reasons.map { .string($0.rawValue) })),
                                               ("key_source", .object(keySource))] + warnings),
                         headers: [("Retry-After", String(Failure.retryAfterDatabase))])
        }
        return .json(.object([("status", .string("ready")), ("key_source", .object(keySource))] + warnings))
    }

    func metricsPage() -> Response {
        let keys = tokens.keyReadiness
        var samples = [
            Metrics.Sample(name: "tokensignin_keys_loaded", help: "1 when a usable key set is loaded.", value: keys.loaded ? 1 : 0),
            Metrics.Sample(name: "tokensignin_keys_stale", help: "1 when the key set is served past its expiry.", value: keys.stale ? 1 : 0),
            Metrics.Sample(name: "tokensignin_key_refreshes_total", help: "Key set fetches started.", type: "counter", value: Double(keys.fetches)),
            Metrics.Sample(name: "tokensignin_key_refresh_failures_total", help: "Key set fetches that failed.", type: "counter",
                           value: Double(keys.failures)),
            Metrics.Sample(name: "tokensignin_key_source", help: "Where the keys come from: google, or a url or file trusted by TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS.",
                           labels: [("kind", service.keySource.kind)], value: 1),
        ]
        if let age = keys.ageSeconds {
            samples.append(Metrics.Sample(name: "tokensignin_key_set_age_seconds", help: "Seconds since the key set was fetched.", value: age))
        }
        if let cache = service.sessionCache {
            let figures = cache.figures
            for (result, count) in [("hit", figures.hits), ("miss", figures.misses), ("unusable", figures.unusable)] {
                samples.append(Metrics.Sample(name: "tokensignin_session_cache_lookups_total",
                                              help: "Session checks by what the session cache did: answered (hit), asked PostgreSQL and kept the answer (miss), or asked PostgreSQL because the cache could not be trusted (unusable).",
                                              type: "counter", labels: [("result", result)], value: Double(count)))
            }
            samples += [
                Metrics.Sample(name: "tokensignin_session_cache_entries", help: "Sessions the session cache holds.", value: Double(figures.entries)),
                Metrics.Sample(name: "tokensignin_session_cache_usable",
                               help: "1 while a heartbeat through PostgreSQL has vouched for the session cache within its bound.",
                               value: figures.usable ? 1 : 0),
                Metrics.Sample(name: "tokensignin_session_cache_heartbeats_total",
                               help: "Heartbeats this responder sent through PostgreSQL; every responder's heartbeats vouch for the others' caches too.",
                               type: "counter", value: Double(figures.heartbeats)),
                Metrics.Sample(name: "tokensignin_session_cache_evictions_total",
                               help: "Cached sessions evicted because PostgreSQL or this responder ended them.", type: "counter",
                               value: Double(figures.evictions)),
            ]
            if let age = figures.heartbeatAge {
                samples.append(Metrics.Sample(name: "tokensignin_session_cache_heartbeat_age_seconds",
                                              help: "Seconds since the moment a heartbeat last vouched for the session cache as of.", value: age))
            }
        }
        if let risc = keys.riscConfiguration {
            samples += [
                Metrics.Sample(name: "tokensignin_risc_configuration_mismatch",
                               help: "1 when Google's RISC configuration names another issuer or jwks_uri than the receiver uses.",
                               value: risc.mismatch ? 1 : 0),
                Metrics.Sample(name: "tokensignin_risc_configuration_separate_keys",
                               help: "1 when POST /risc verifies with the key set of the discovered jwks_uri.",
                               value: risc.securityEventKeysURL == nil ? 0 : 1),
                Metrics.Sample(name: "tokensignin_risc_configuration_checks_total", help: "Reads of Google's RISC configuration.",
                               type: "counter", value: Double(risc.checks)),
                Metrics.Sample(name: "tokensignin_risc_configuration_check_failures_total",
                               help: "Reads of Google's RISC configuration that failed.", type: "counter", value: Double(risc.failures)),
            ]
        }
        samples += service.readiness.samples
        let text = metrics.exposition(samples + service.samples())
        return Response(status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8"),
                                               ("Cache-Control", "no-store")], body: Array(text.utf8))
    }
}
