// Failover under load: a primary with a synchronous streaming standby, the responder on a libpq multi-host URL
// (target_session_attrs=read-write); the primary crashes mid-sign-ins, the standby is promoted, the responder
// finds the new primary by itself, and every session a client was answered 200 for is still valid.
import Foundation
import IDToken
import Testing

/// Every answer the load got, and waits on their count.
private final class Load: @unchecked Sendable {
    // SAFETY: every field is read and written under `condition`.
    struct Result {
        var phase: Phase
        var sub: String
        var answer: Answer
    }
    enum Phase { case primary, down, promoted }

    private let condition = NSCondition()
    private var results: [Result] = []
    private var phase = Phase.primary
    private var stopped = false
    private var taken = 0
    private let tokens: Int

    init(tokens: Int) { self.tokens = tokens }

    /// The index of the next token to sign in with, or nil once stopped or out of tokens.
    func take() -> Int? {
        condition.withLock {
            guard !stopped, taken < tokens else { return nil }
            taken += 1
            return taken - 1
        }
    }

    var current: Phase { condition.withLock { phase } }
    var all: [Result] { condition.withLock { results } }

    func enter(_ next: Phase) { condition.withLock { phase = next } }
    func stop() { condition.withLock { stopped = true } }

    func record(_ result: Result) {
        condition.withLock {
            results.append(result)
            condition.broadcast()
        }
    }

    /// Waits until `count` answers that started in `phase` match `matching`; false after the deadline.
    func wait(for count: Int, in phase: Phase, seconds: Double, matching: (Answer) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        return condition.withLock {
            while results.filter({ $0.phase == phase && matching($0.answer) }).count < count {
                guard condition.wait(until: deadline) else { return false }
            }
            return true
        }
    }
}

@Suite(.serialized) struct FailoverEndToEndTests {
    @Test func everySessionAnswered200SurvivesThePrimaryCrashingAndTheStandbyTakingOver() throws {
        let root = ProcessInfo.processInfo.environment["TS_TEST_RUNDIR"] ?? NSTemporaryDirectory()
        // Under folders scripts/with-test-db destroys (…/pg and …/pg-*), whatever happens here.
        let folder = root + "/failover-\(getpid())"
        let primary = folder + "/pg", standby = folder + "/pg-standby"
        let cluster = Paths.script("pgcluster")
        try #require(try run(cluster, ["start", primary, "55701"]).status == 0)
        defer { _ = try? run(cluster, ["destroy", primary]) }
        let made = try run(cluster, ["standby", standby, "55702", primary, "55701", "sync"])
        try #require(made.status == 0, "\(made.stderr)")
        defer { _ = try? run(cluster, ["destroy", standby]) }
        let socket = { (dir: String, port: String) throws -> String in
            let env = try run(cluster, ["env", dir, port]).stdout
            return String(try #require(env.firstMatch(of: /PGHOST='([^']*)'/)?.1))
        }
        let hosts = "\(try socket(primary, "55701")),\(try socket(standby, "55702"))"
        let multiHost = ["PGHOST": hosts, "PGPORT": "55701,55702", "PGUSER": "postgres", "PGTARGETSESSIONATTRS": "read-write"]
        // The responder as an operator would configure it, one URL naming both hosts (psql and migrate use PG*).
        let encoded = hosts.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: ",-._")))!
        let url = "postgresql://postgres@/e2e_failover_\(getpid())?host=\(encoded)&port=55701,55702&target_session_attrs=read-write"
        let stack = try Stack("failover", environment: ["TOKENSIGNIN_DATABASE_URL": url], postgres: multiHost)
        try #require(stack.database == "e2e_failover_\(getpid())")
        let sync = try stack.psql("SELECT sync_state FROM pg_stat_replication", database: "postgres")
        try #require(sync == [["sync"]], "every commit waits for the standby: \(sync)")

        let tokens = try mint(stack, count: 2_000)
        let load = Load(tokens: tokens.count)
        let clients = DispatchGroup()
        for _ in 0..<4 {
            clients.enter()
            Thread {
                defer { clients.leave() }
                while let index = load.take() {
                    let phase = load.current
                    guard let answer = try? stack.signIn(tokens[index].token) else { continue }
                    load.record(.init(phase: phase, sub: tokens[index].sub, answer: answer))
                }
            }.start()
        }
        defer { load.stop(); _ = clients.wait(timeout: .now() + 60) }

        #expect(load.wait(for: 20, in: .primary, seconds: 120) { $0.status == 200 }, "sign-ins before the crash")
        load.enter(.down)
        try #require(try run(cluster, ["crash", primary]).status == 0)
        // Promote only once a client has met the outage, so the failover is seen, not slept past.
        #expect(load.wait(for: 1, in: .down, seconds: 120) { $0.status != 200 }, "no request met the outage")
        let promoted = try run(cluster, ["promote", standby])
        try #require(promoted.status == 0, "\(promoted.stderr)")
        load.enter(.promoted)
        #expect(load.wait(for: 20, in: .promoted, seconds: 120) { $0.status == 200 }, "the responder did not find the new primary")
        load.stop()
        #expect(clients.wait(timeout: .now() + 120) == .success)

        let results = load.all
        let ok = results.filter { $0.answer.status == 200 }
        let refused = results.filter { $0.answer.status != 200 }
        for result in refused {
            #expect(result.answer.status == 503 && result.answer.header("Retry-After") != nil,
                    "an outage is a 503 to retry, never a fault or a refusal: \(result.answer)")
        }
        #expect(!refused.isEmpty)
        // Every 200 is a committed session on the new primary: by hash in the database, and by the real check.
        let hashes = try ok.map { result -> String in
            let token = try #require((result.answer.json["session"] as? [String: Any])?["token"] as? String)
            return Digest.sha256(Array(token.utf8)).map { String(format: "%02x", $0) }.joined()
        }
        let found = try stack.psql("SELECT count(*) FROM signin.sessions WHERE revoked_at IS NULL AND encode(token_hash, 'hex') IN (\(hashes.map { "'\($0)'" }.joined(separator: ",")))")
        #expect(found == [[String(ok.count)]], "\(ok.count) sessions answered 200, found \(found)")
        for result in ok {
            let token = (result.answer.json["session"] as? [String: Any])?["token"] as? String ?? ""
            let check = try stack.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"])
            #expect(check.status == 200 && check.header("X-User-Sub") == result.sub, "a session answered 200 is gone: \(check)")
        }
        #expect(try stack.psql("SELECT pg_is_in_recovery()", database: "postgres") == [["f"]])
        #expect(try stack.operatorsRequest("GET", "/readyz").status == 200)
        #expect(stack.serverLog.contains("database_reconnect") || stack.serverLog.contains("database_connect_failed"))
    }

    /// `count` development ID tokens for distinct users, minted in one run of `tokensignin dev token`.
    private func mint(_ stack: Stack, count: Int) throws -> [(sub: String, token: String)] {
        let result = try run(Paths.binary, ["dev", "token", "--key", stack.keyPath, "--kid", stack.kid, "--aud", stack.clientID,
                                            "--sub", "5000", "--ttl", "3600", "--count", String(count)])
        try #require(result.status == 0, "\(result.stderr)")
        let tokens = result.stdout.split(separator: "\n").map(String.init)
        try #require(tokens.count == count)
        return tokens.enumerated().map { (sub: "5000-\($0.offset + 1)", token: $0.element) }
    }
}
