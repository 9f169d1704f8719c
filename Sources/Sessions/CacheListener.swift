// The session cache's own connection to PostgreSQL: the triggers' notifications, a heartbeat, the due last_seen_at.
import Logging
import Signing
import Store
import Synchronization
import Threads

/// Keeps a `SessionCache` true. On one direct connection (never a transaction pooler's: LISTEN belongs to a server
/// session) it LISTENs on `channel`, where the triggers of sql/014 announce every session that may have ended and
/// every user whose sessions may have; it evicts them. Every `heartbeat` it NOTIFYs a channel of its own and, when
/// that comes back, tells the cache everything committed before it was sent has been applied. It also writes the
/// `last_seen_at` of the checks the cache answered. When the connection breaks or lags, the cache is disabled
/// (emptied; checks ask PostgreSQL) until a heartbeat comes back on a new one.
package final class CacheListener: Sendable {
    /// Where the triggers announce ended sessions (sql/014_session_notifications.sql).
    package static let channel = "tokensignin_sessions"
    /// How often a heartbeat is sent; the cache is usable while one sent within its `bound` has come back.
    package static let heartbeat: Duration = .milliseconds(50)
    /// How often the due `last_seen_at` are written.
    static let seenInterval: Duration = .seconds(1)
    /// The longest the listener waits for PostgreSQL's answer to its own statements before it gives the connection up.
    static let responseTimeout: Duration = .seconds(2)
    /// A lost connection is logged at most once per interval; reconnecting waits longer after each failure.
    static let failureLog = RateLimit(interval: .seconds(10))

    private let cache: SessionCache
    private let conninfo: String
    private let log: Log
    private let redact: @Sendable (String) -> String
    /// This responder's heartbeat channel: only it listens there.
    private let heartbeatChannel = "tokensignin_heartbeat_" + SecureRandom.bytes(8).map { String($0, radix: 16) }.joined()
    private let state = Monitor<State>(State())

    private struct State {
        var stopping = false
        var running = false
    }

    package init(cache: SessionCache, conninfo: String, log: Log, redact: @escaping @Sendable (String) -> String = { $0 }) {
        self.cache = cache
        self.conninfo = conninfo
        self.log = log
        self.redact = redact
    }

    /// Starts the listener's thread; false when no thread could be made (the cache then stays unusable).
    @discardableResult
    package func start() -> Bool {
        state.update { $0.running = true }
        guard Threads.start(detached: true, { [self] in run() }) != nil else {
            state.update { $0.running = false }
            return false
        }
        return true
    }

    /// Stops the thread and waits for it (at most a heartbeat and one statement's answer).
    package func stop() {
        state.update { $0.stopping = true }
        _ = state.wait(until: { !$0.running }, deadline: monotonicDeadline(after: Self.responseTimeout * 3))
    }

    private var stopping: Bool { state.current.stopping }

    private func run() {
        defer { state.update { $0.running = false } }
        var failures = 0
        while !stopping {
            do throws(StoreError) {
                try listen { failures = 0 }
            } catch {
                cache.disable()
                failures += 1
                if let suppressed = Self.failureLog.admit() {
                    log.warning("session_cache_unusable", ["code": error.code.name, "sqlstate": error.sqlState,
                                                           "detail": redact(error.detail),
                                                           "suppressed": suppressed > 0 ? String(suppressed) : nil])
                }
                // Up to a second between attempts while PostgreSQL is away; checks ask PostgreSQL meanwhile.
                let pause = min(100 * failures, 1_000)
                _ = state.wait(until: { $0.stopping }, deadline: monotonicDeadline(after: .milliseconds(pause)))
            }
        }
        cache.disable()
    }

    /// One connection's life: listen, then heartbeats, evictions and writes until it fails or the listener stops.
    /// `connected` is called once the first heartbeat has come back.
    /// Only a primary delivers notifications (a standby refuses LISTEN): among several hosts, libpq is asked for a
    /// writable one, whatever the conninfo's `target_session_attrs` says.
    private func listen(connected: () -> Void) throws(StoreError) {
        let connection = try Connection(conninfo: PostgresStore.requiringReadWrite(conninfo), pooler: .none,
                                        responseTimeout: Self.responseTimeout)
        // A heartbeat only needs to be ordered with the others' commits here, not to wait for a standby.
        try connection.query("SET synchronous_commit TO local")
        try connection.query("LISTEN \(Self.channel)")
        try connection.query("LISTEN \(heartbeatChannel)")
        // Whatever was cached before this connection listened may have missed a notification.
        cache.flush()
        var sent: [UInt64: UInt64] = [:]  // heartbeat number -> when it was sent (monotonic nanoseconds)
        var number: UInt64 = 0
        var nextBeat: UInt64 = 0
        var nextSeen = monotonicDeadline(after: Self.seenInterval)
        var confirmedOnce = false
        while !stopping {
            let now = monotonicNanoseconds()
            if now >= nextBeat {
                number += 1
                sent[number] = now
                sent[number &- 64] = nil  // a heartbeat older than that never counts again
                try connection.execute(Queries.heartbeat, [heartbeatChannel, String(number)])
                nextBeat = now + Self.heartbeat.nanoseconds
            }
            if now >= nextSeen {
                try recordSeen(connection)
                nextSeen = monotonicDeadline(after: Self.seenInterval)
            }
            let waitFor = Duration.nanoseconds(Int64(nextBeat &- min(nextBeat, monotonicNanoseconds())))
            var sessions: Set<Int64> = [], users: Set<Int64> = []
            for note in try connection.notifications(waitingUpTo: waitFor) {
                if note.channel == Self.channel {
                    guard Self.read(note.payload, sessions: &sessions, users: &users) else {
                        cache.flush()
                        sessions.removeAll()
                        users.removeAll()
                        continue
                    }
                } else if note.channel == heartbeatChannel, let beat = UInt64(note.payload), let at = sent[beat] {
                    // In order: what came before this heartbeat is evicted before it vouches for the cache.
                    cache.evict(sessions: sessions, users: users)
                    sessions.removeAll()
                    users.removeAll()
                    cache.confirm(sentAt: at)
                    if !confirmedOnce {
                        confirmedOnce = true
                        connected()
                    }
                }
            }
            cache.evict(sessions: sessions, users: users)
        }
    }

    /// Writes the `last_seen_at` the cache's hits have made due, a thousand sessions a statement.
    private func recordSeen(_ connection: Connection) throws(StoreError) {
        let due = cache.takeDueSeen()
        for start in stride(from: 0, to: due.count, by: 1_000) {
            try connection.execute(Queries.recordSeen, [Array(due[start..<min(start + 1_000, due.count)])])
        }
    }

    /// Adds what a trigger's payload names (`s <id> ...`, `u <id> ...`); false for `flush` and anything unreadable.
    static func read(_ payload: String, sessions: inout Set<Int64>, users: inout Set<Int64>) -> Bool {
        let words = payload.split(separator: " ")
        guard let kind = words.first, kind == "s" || kind == "u", words.count > 1 else { return false }
        for word in words.dropFirst() {
            guard let id = Int64(word) else { return false }
            if kind == "s" { sessions.insert(id) } else { users.insert(id) }
        }
        return true
    }
}
