// Why `/readyz` answers 503: its reasons, when the session cache counts against it, and the count of such answers.
import Sessions
import Synchronization

/// A reason `/readyz` gives for a `503`, as its JSON lists it and `tokensignin_not_ready_total{reason}` counts it.
package enum NotReadyReason: String, CaseIterable, Sendable {
    /// The database did not answer (down, restarting, timed out, too many connections).
    case databaseUnavailable = "database_unavailable"
    /// The database answered with a fault retrying will not fix (a missing privilege or table).
    case databaseFault = "database_fault"
    /// The database answered read-only (a standby, `default_transaction_read_only`); the worker let the connection go.
    case databaseReadOnly = "database_read_only"
    case keysNotLoaded = "keys_not_loaded"
    case keysStale = "keys_stale"
    /// The session cache is on and has not been usable for longer than `Readiness.cacheGrace`.
    case sessionCacheUnusable = "session_cache_unusable"
}

/// What a responder's workers share for `/readyz`: when the responder started, and how many answers were not ready,
/// by reason. One per process (`Service.readiness`).
package final class Readiness: Sendable {
    /// How long the session cache may be unusable before it makes the responder not ready: at start (the first
    /// heartbeat comes back within milliseconds, a busy box within a few hundred), and after the last moment a
    /// heartbeat vouched for it as of, so a heartbeat or two late on a busy box (the cache's own bound is 100 ms) never takes the responder out
    /// of its load balancer, while a listener that lost PostgreSQL or cannot LISTEN there (a standby) does at once.
    package static let cacheGrace: Duration = .seconds(1)

    private let started: ContinuousClock.Instant
    private let counts = Mutex<[NotReadyReason: Int]>([:])

    /// `started`: when the responder started (tests move it back).
    package init(started: ContinuousClock.Instant = .now) {
        self.started = started
    }

    /// Whether `cache` may be trusted: usable, or not usable for less than `cacheGrace` (since the moment a heartbeat
    /// last vouched for it as of; with none since its listener last connected, since the responder started).
    func trusts(_ cache: SessionCache, now: ContinuousClock.Instant = .now) -> Bool {
        if cache.isUsable { return true }
        if let age = cache.heartbeatAge { return age <= Self.cacheGrace / .seconds(1) }
        return now - started < Self.cacheGrace
    }

    /// Counts one `/readyz` answer that was not ready, once under each of its reasons.
    func record(_ reasons: [NotReadyReason]) {
        guard !reasons.isEmpty else { return }
        counts.withLock { counts in for reason in reasons { counts[reason, default: 0] += 1 } }
    }

    /// `tokensignin_not_ready_total{reason}`, every reason present from the start (0), so `increase()` sees the first.
    var samples: [Metrics.Sample] {
        let counts = self.counts.withLock { $0 }
        return NotReadyReason.allCases.map { reason in
            Metrics.Sample(name: "tokensignin_not_ready_total",
                           help: "/readyz answers that were 503, by reason (an answer with two reasons counts under both).",
                           type: "counter", labels: [("reason", reason.rawValue)], value: Double(counts[reason] ?? 0))
        }
    }
}
