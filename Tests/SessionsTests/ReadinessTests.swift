// PostgresStore.ping, /readyz's statement: a read-only server is reported (SQLSTATE 25006) and let go, and the worker's
// next connection finds the primary of a multi-host conninfo even without target_session_attrs.
import Foundation
@testable import IDToken
import Logging
@testable import Sessions
import Store
import Synchronization
import TestSupport
import Testing

@Suite(.serialized) struct ReadinessTests {
    /// A database set read-only (`default_transaction_read_only`, as a DBA fences it): ping reports it, and the
    /// connection is dropped, so once the database may write again the very next call is on a new session.
    @Test func aReadOnlyDatabaseIsReportedAndItsConnectionDropped() throws {
        let db = try TestDatabase.migrated("ready_ro")
        let lines = LockedLines()
        let reconnects = Atomic<Int>(0)
        let store = PostgresStore(conninfo: db.conninfo, policy: TestStores.policy, log: Log { lines.append($0) },
                                  onReconnect: { reconnects.add(1, ordering: .relaxed) })
        try store.ping()
        let admin = try Connection(conninfo: "")
        try admin.query("ALTER DATABASE \(db.name) SET default_transaction_read_only = on")
        // The setting reaches new sessions only: the one the store holds still writes.
        try store.ping()
        try admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [db.name])
        // The lost session is re-established at once (PostgresStore.onceMore), on a read-only one this time.
        for _ in 0..<2 {
            let readOnly = #expect(throws: StoreError.self) { try store.ping() }
            #expect(readOnly?.isReadOnlyServer == true && readOnly?.isRetryable == true, "\(String(describing: readOnly))")
        }
        // Logged once per 10 s for the whole process: this suite's first read-only server.
        #expect(lines.all.contains { $0.contains("event=database_read_only") && $0.contains("next=reconnect") && !$0.contains("next=reconnect_read_write") })
        // The read-only session was let go (its backend ends once libpq has closed the socket).
        let deadline = Date().addingTimeInterval(10)
        var sessions = ""
        repeat {
            sessions = try admin.query("SELECT count(*) FROM pg_stat_activity WHERE datname = $1", [db.name])[0, 0] ?? ""
        } while sessions != "0" && Date() < deadline && usleep(10_000) == 0
        #expect(sessions == "0", "the read-only session was let go")
        // A sign-in there meets 25006 twice (the retry connects to the same, only, host): a 503, nothing written.
        let signIn = #expect(throws: StoreError.self) {
            try store.signIn(verifiedToken(sub: "ro-1"), TestStores.session())
        }
        #expect(signIn?.isReadOnlyServer == true)
        // A batch of sign-ins there: the whole pipeline fails read-only (a 503 for each), and each attempt's
        // connection is let go and counted in `tokensignin_database_reconnects_total`, as a single statement's is.
        let counted = reconnects.load(ordering: .relaxed)
        #expect(counted >= 2, "the terminated session and the read-only ones")
        let batch = ["ro-3", "ro-4"].map { (token: verifiedToken(sub: $0), session: TestStores.session()) }
        let batchError = #expect(throws: StoreError.self) { try store.signIns(batch) }
        #expect(batchError?.isReadOnlyServer == true, "\(String(describing: batchError))")
        #expect(reconnects.load(ordering: .relaxed) == counted + 1, "the pipeline's connection let go once, as a single statement's is")
        try admin.query("ALTER DATABASE \(db.name) RESET default_transaction_read_only")
        try store.ping()
        guard case .signedIn = try store.signIn(verifiedToken(sub: "ro-2"), TestStores.session()) else {
            Issue.record("refused")
            return
        }
        #expect(try db.connect().query("SELECT google_sub FROM signin.users").count == 1)
    }

    /// The conninfo a worker asks for a writable server with: the operator's, then `target_session_attrs=read-write`.
    @Test(arguments: [
        ("postgresql://app@db1,db2/tokensignin", "postgresql://app@db1,db2/tokensignin?target_session_attrs=read-write"),
        ("postgresql://app@db1,db2/tokensignin?sslmode=verify-full", "postgresql://app@db1,db2/tokensignin?sslmode=verify-full&target_session_attrs=read-write"),
        ("postgres://db1,db2/x?target_session_attrs=any", "postgres://db1,db2/x?target_session_attrs=any&target_session_attrs=read-write"),
        ("host=db1,db2 dbname=tokensignin", "host=db1,db2 dbname=tokensignin target_session_attrs=read-write"),
        ("", " target_session_attrs=read-write"),
    ])
    func theWritableConninfoAddsTargetSessionAttrsLast(conninfo: String, expected: String) throws {
        #expect(PostgresStore.requiringReadWrite(conninfo) == expected)
        try Connection.validate(conninfo: expected)
    }

    /// A primary and its standby, the standby named first and no `target_session_attrs`: libpq connects to the
    /// standby. The first ping says so (25006) and lets it go; the worker then asks for a writable server and
    /// lands on the primary. A sign-in that meets the standby first is retried there at once: the client sees a 200.
    @Test func aStandbyNamedFirstWithoutTargetSessionAttrsLeadsTheWorkerToThePrimary() throws {
        let pair = try StandbyPair()
        defer { pair.destroy() }
        let standbyFirst = "host=\(pair.standbySocket),\(pair.primarySocket) port=\(pair.standbyPort),\(pair.primaryPort) user=postgres dbname=tokensignin"
        let store = PostgresStore(conninfo: standbyFirst, policy: TestStores.policy, log: Log { _ in })
        let first = #expect(throws: StoreError.self) { try store.ping() }
        #expect(first?.isReadOnlyServer == true, "\(String(describing: first))")
        try store.ping()
        guard case .signedIn = try store.signIn(verifiedToken(sub: "standby-1"), TestStores.session()) else {
            Issue.record("refused")
            return
        }

        let signingFirst = PostgresStore(conninfo: standbyFirst, policy: TestStores.policy, log: Log { _ in })
        guard case .signedIn = try signingFirst.signIn(verifiedToken(sub: "standby-2"), TestStores.session()) else {
            Issue.record("refused")
            return
        }
        try signingFirst.ping()

        // Only the standby: nothing else to go to. Every ping says read-only; it never claims to be ready.
        let standbyOnly = PostgresStore(conninfo: "host=\(pair.standbySocket) port=\(pair.standbyPort) user=postgres dbname=tokensignin",
                                        policy: TestStores.policy, log: Log { _ in })
        for _ in 0..<3 {
            let error = #expect(throws: StoreError.self) { try standbyOnly.ping() }
            #expect(error?.isReadOnlyServer == true)
        }
    }
}

extension ReadinessTests {
    /// The session cache's listener needs the primary (a standby refuses LISTEN): behind a URL that names a standby
    /// first and leaves target_session_attrs at any, it still listens there, and the cache becomes usable.
    @Test func theCacheListenerFindsThePrimaryBehindAStandbyNamedFirst() throws {
        let pair = try StandbyPair()
        defer { pair.destroy() }
        let standbyFirst = "host=\(pair.standbySocket),\(pair.primarySocket) port=\(pair.standbyPort),\(pair.primaryPort) user=postgres dbname=tokensignin"
        let cache = SessionCache(capacity: 10, idleTimeout: 3600)
        let listener = CacheListener(cache: cache, conninfo: standbyFirst, log: Log { _ in })
        #expect(listener.start())
        defer { listener.stop() }
        #expect(waitUntil(seconds: 20) { cache.isUsable })
    }
}

/// A private primary with a streaming standby (scripts/pgcluster), the schema migrated on the primary.
private struct StandbyPair {
    let folder = NSTemporaryDirectory() + "tokensignin-ready-\(randomHex(4))"
    let primaryPort = 55497, standbyPort = 55498  // sockets in the clusters' own folders: the ports cannot clash
    var primary: String { folder + "/pg" }
    var standby: String { folder + "/pg-standby" }
    var primarySocket: String { Self.socket(primary) }
    var standbySocket: String { Self.socket(standby) }

    init() throws {
        let cluster = repositoryRoot + "/scripts/pgcluster"
        guard spawnAndWait([cluster, "start", primary, String(primaryPort)]) == 0 else {
            throw StoreError(.connectionFailed, "pgcluster start failed")
        }
        let primaryConninfo = "host=\(Self.socket(primary)) port=\(primaryPort) user=postgres dbname=tokensignin"
        try Migrator(directory: repositoryRoot + "/sql").migrate(on: try Connection(conninfo: primaryConninfo))
        guard spawnAndWait([cluster, "standby", standby, String(standbyPort), primary, String(primaryPort), "sync"]) == 0 else {
            destroy()
            throw StoreError(.connectionFailed, "pgcluster standby failed")
        }
    }

    /// The cluster's socket folder (pgcluster may keep it under /tmp, linked from the cluster's folder).
    private static func socket(_ directory: String) -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/socket")) ?? directory + "/socket"
    }

    func destroy() {
        _ = spawnAndWait([repositoryRoot + "/scripts/pgcluster", "destroy", standby])
        _ = spawnAndWait([repositoryRoot + "/scripts/pgcluster", "destroy", primary])
        try? FileManager.default.removeItem(atPath: folder)
    }
}
