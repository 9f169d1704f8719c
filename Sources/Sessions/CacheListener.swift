// The session cache's own connection to PostgreSQL: the triggers' notifications, shared heartbeats, the due last_seen_at.
import Logging
import Store
import Synchronization
import Threads

/// Keeps a `SessionCache` true. On one direct connection (never a transaction pooler's: LISTEN belongs to a server
/// session) it LISTENs on `channel`, where the triggers of sql/014 announce every session that may have ended and
/// every user whose sessions may have; it evicts them. It also writes the `last_seen_at` of the checks the cache
/// answered. When the connection breaks or lags, the cache is disabled (emptied; checks ask PostgreSQL) until a
/// heartbeat vouches for it again on a new one.
///
/// Heartbeats are shared by every responder on the database. PostgreSQL wakes every listening server process of a
/// database for every NOTIFY, whatever its channel, so one heartbeat per responder every 50 ms would cost the
/// primary in proportion to the square of the responders. Instead, every `tick` the listener either sends a
/// heartbeat of its own on `heartbeatChannel` when nothing has vouched for the cache for `heartbeat` (payload: its
/// transaction id, its number and its server process's start); or, while other responders' heartbeats are heard,
/// takes a snapshot: the `xmax` of `pg_current_snapshot()` (no transaction whose id is at or above it had completed
/// then). A heartbeat of any responder (a server process of this connection's role, told apart by its process ID
/// and start) whose id is at least a snapshot's `xmax` committed after that snapshot was taken; notifications
/// arrive in commit order, so once it has arrived every notification committed before the snapshot has been
/// applied, and the cache is vouched for as of the moment the snapshot was asked for. One's own heartbeat vouches
/// as of the moment it was sent (`Vouching`).
package final class CacheListener: Sendable {
    /// Where the triggers announce ended sessions (sql/014_session_notifications.sql).
    package static let channel = "tokensignin_sessions"
    /// Where every responder's listener sends and receives heartbeats.
    package static let heartbeatChannel = "tokensignin_heartbeat"
    /// How often the listener takes a snapshot or sends a heartbeat.
    static let tick: Duration = .milliseconds(25)
    /// A heartbeat of its own is sent when the cache was last vouched for as of longer ago than this: alone, one every
    /// other tick (50 ms), each back well within the cache's bound (100 ms) of the one before.
    package static let heartbeat: Duration = .milliseconds(40)
    /// While others' heartbeats are heard, each connection waits a little longer than `heartbeat`, by its own amount
    /// drawn from 0 up to this: the one that waits least sends most of the heartbeats, the rest rarely need to.
    static let patienceSpread: Duration = .milliseconds(20)
    /// Snapshots are taken only while another responder's heartbeats have been heard within this: alone, a
    /// listener's own heartbeats vouch for its cache without them.
    static let othersHeard: Duration = .seconds(1)
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

    /// One connection's life: listen, then snapshots, heartbeats, evictions and writes until it fails or the
    /// listener stops. `connected` is called once a heartbeat has first vouched for the cache.
    /// Only a primary delivers notifications (a standby refuses LISTEN): among several hosts, libpq is asked for a
    /// writable one, whatever the conninfo's `target_session_attrs` says.
    private func listen(connected: () -> Void) throws(StoreError) {
        let connection = try Connection(conninfo: PostgresStore.requiringReadWrite(conninfo), pooler: .none,
                                        responseTimeout: Self.responseTimeout)
        // A heartbeat only needs to be ordered with the others' commits here, not to wait for a standby.
        try connection.query("SET synchronous_commit TO local")
        try connection.query("LISTEN \(Self.channel)")
        try connection.query("LISTEN \(Self.heartbeatChannel)")
        let (backendPID, started) = try connection.execute(Queries.heartbeatSelf).decode(row: 0, as: Int.self, Int64.self)
        // Whatever was cached before this connection listened may have missed a notification.
        cache.flush()
        var vouching = Vouching(own: Vouching.Sender(pid: Int32(truncatingIfNeeded: backendPID), started: started))
        let patience = Self.heartbeat + .nanoseconds(Int64.random(in: 0...Int64(Self.patienceSpread.nanoseconds)))
        var nextTick: UInt64 = 0
        var nextSeen = bootNanoseconds() + Self.seenInterval.nanoseconds
        var confirmedOnce = false
        while !stopping {
            let now = bootNanoseconds()  // the cache's clock, which counts a suspended host's time
            if now >= nextTick {
                let othersHeard = vouching.hearsOthers(within: Self.othersHeard, now: now)
                if cache.vouchedFor(within: othersHeard ? patience : Self.heartbeat, now: now) {
                    if othersHeard {
                        vouching.took(snapshot: try connection.execute(Queries.heartbeatSnapshot).decode(row: 0, as: Int64.self),
                                      at: now)
                    }
                } else {
                    let number = vouching.sending(at: now)
                    try connection.execute(Queries.heartbeat, [Self.heartbeatChannel, String(number), String(started)])
                    cache.countHeartbeat()
                }
                nextTick = now + Self.tick.nanoseconds
            }
            if now >= nextSeen {
                try recordSeen(connection)
                nextSeen = now + Self.seenInterval.nanoseconds
            }
            let waitFor = Duration.nanoseconds(Int64(nextTick &- min(nextTick, bootNanoseconds())))
            var sessions: Set<Int64> = [], users: Set<Int64> = []
            for note in try connection.notifications(waitingUpTo: waitFor) {
                if note.channel == Self.channel {
                    guard Self.read(note.payload, sessions: &sessions, users: &users) else {
                        cache.flush()
                        sessions.removeAll()
                        users.removeAll()
                        continue
                    }
                } else if note.channel == Self.heartbeatChannel, let beat = Vouching.Heartbeat(note.payload),
                          let at = try vouching.received(beat, from: note.senderPID, now: bootNanoseconds(),
                                                         sameRole: { (sender) throws(StoreError) in
                                                             try connection.execute(Queries.heartbeatSender,
                                                                                    [Int(sender.pid), sender.started])
                                                                 .decode(row: 0, as: Bool.self)
                                                         }) {
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
