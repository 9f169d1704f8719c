// The protected site never waits on sign-ins or on Google: with sign-ins stuck behind a table lock, or on a key
// endpoint that hangs at a cold start, session checks through nginx keep answering at once (the checks lane,
// docs/fastcgi.md), and the stuck sign-ins end in 503 within their bounds instead of piling up.
// Run by `make test-faults`, alone: latencies are only meaningful on a machine not also running other suites.
import Foundation
import Testing
import TestSupport

@Suite(.serialized) struct IsolationEndToEndTests {
    /// The bound the issue sets for a session check while sign-ins are stuck.
    static let checkBound = 0.100

    /// A table lock that blocks every sign-in for 5 s: sign-ins wait for it (until lock_timeout, 2 s, makes them
    /// 503), while session checks, which only read the locked table, answer 200 in under 100 ms throughout.
    @Test func aTableLockBlockingSignInsForFiveSecondsLeavesSessionChecksFast() throws {
        let stack = try Stack("isolock")
        let session = try sessionToken(stack, sub: "180000000000000000001")
        let work = try workFolder(stack)

        // EXCLUSIVE blocks every write to signin.users (the sign-in upsert) but not reads (the check's join).
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        let locker = try spawnProgram("/usr/bin/psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", stack.database, "-c",
                                                        "BEGIN; LOCK TABLE signin.users IN EXCLUSIVE MODE; SELECT pg_sleep(5); COMMIT;"],
                                      environment: ProcessInfo.processInfo.environment.merging(stack.postgres) { $1 }, actions: &actions)
        let lockHeld = try waitUntil(seconds: 10) {
            try stack.count("pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'users' AND l.mode = 'ExclusiveLock' AND l.granted") == 1
        }
        #expect(lockHeld, "the lock was never taken")
        let lockedAt = Date()

        // Eight clients sign in (twice the sign-in workers), and one client checks its session 20 times a second.
        let tokens = try mintTokens(stack, count: 16, sub: "isolock-user")
        let signIns = try (0..<8).map { client in
            try spawnLoad(stack, work: work, name: "signin-\(client)", path: "/tokensignin",
                          transfers: tokens[(client * 2)..<(client * 2 + 2)].map { #"{"idToken":"\#($0)"}"# })
        }
        let checks = try spawnLoad(stack, work: work, name: "check", path: "/auth/session", bearer: session,
                                   transfers: Array(repeating: nil, count: 70), rate: "20/s")
        _ = waitForExit(checks.pid)
        let checksEndedAt = Date()
        for load in signIns { _ = waitForExit(load.pid) }
        _ = waitForExit(locker)

        // The checks ran while the lock was held (70 at 20/s: 3.5 s of the 5 s), each answered 200 in time.
        #expect(checksEndedAt.timeIntervalSince(lockedAt) < 5, "the checks outlasted the lock: the test proves nothing")
        let checkResults = try results(checks)
        #expect(checkResults.count == 70)
        #expect(checkResults.allSatisfy { $0.status == 200 }, "\(checkResults.filter { $0.status != 200 })")
        let slowest = checkResults.map(\.seconds).max() ?? .infinity
        #expect(slowest < Self.checkBound, "slowest check \(Int(slowest * 1000)) ms while sign-ins were blocked")
        print("table lock: checks median \(milliseconds(median(checkResults.map(\.seconds)))) ms, slowest \(milliseconds(slowest)) ms")

        // The sign-ins really were held by the lock: each client's first waited for it (≥ 1.5 s), and every one
        // ended 200 (after the lock) or 503 (lock_timeout), never a 5xx of nginx's or a client error.
        let signInResults = try signIns.flatMap { try results($0) }
        #expect(signInResults.count == 16)
        #expect(signInResults.allSatisfy { [200, 503].contains($0.status) }, "\(signInResults.map(\.status))")
        #expect(try signIns.allSatisfy { try results($0).first.map { $0.seconds >= 1.5 } ?? false },
                "a sign-in was not blocked by the lock: \(signInResults.map(\.seconds))")
        #expect(signInResults.contains { $0.status == 503 }, "lock_timeout (2 s) ended none of them")

        // Once the lock is gone, sign-ins work again.
        #expect(try stack.signIn(try stack.token(sub: "180000000000000000002")).status == 200)
        try? FileManager.default.removeItem(atPath: work)
    }

    /// A cold start with Google's key endpoint hanging: every sign-in is answered 503 (keys unavailable,
    /// retryable) within TOKENSIGNIN_KEY_WAIT (1 s) plus its queueing, and the hanging fetch holds workers for one
    /// KEY_WAIT at most, not one per request; session checks need no keys and answer 200 in under 100 ms.
    @Test func aHangingKeyEndpointAtColdStartLeavesSessionChecksFastAndSignInsGet503InTime() throws {
        let stack = try Stack("isokeys")
        let session = try sessionToken(stack, sub: "190000000000000000001")
        let work = try workFolder(stack)

        let google = try RecordingServer()
        try google.answer("/certs", status: 200, body: try String(contentsOfFile: stack.jwksPath, encoding: .utf8), delay: 60)
        #expect(stack.stopServer() == 0)
        try stack.startServer(overriding: ["TOKENSIGNIN_JWKS_FILE": "", "TOKENSIGNIN_JWKS_URL": google.base + "/certs",
                                           "TOKENSIGNIN_KEY_WAIT": "1s"])
        let cold = try stack.operatorsRequest("GET", "/readyz")
        #expect(cold.status == 503 && (cold.json["reasons"] as? [String]) == ["keys_not_loaded"], "\(cold)")

        let tokens = try mintTokens(stack, count: 40, sub: "isokeys-user")
        let signIns = try (0..<8).map { client in
            try spawnLoad(stack, work: work, name: "signin-\(client)", path: "/tokensignin",
                          transfers: tokens[(client * 5)..<(client * 5 + 5)].map { #"{"idToken":"\#($0)"}"# })
        }
        let checks = try spawnLoad(stack, work: work, name: "check", path: "/auth/session", bearer: session,
                                   transfers: Array(repeating: nil, count: 60), rate: "20/s")
        _ = waitForExit(checks.pid)
        for load in signIns { _ = waitForExit(load.pid) }

        let checkResults = try results(checks)
        #expect(checkResults.count == 60)
        #expect(checkResults.allSatisfy { $0.status == 200 }, "\(checkResults.filter { $0.status != 200 })")
        let slowest = checkResults.map(\.seconds).max() ?? .infinity
        #expect(slowest < Self.checkBound, "slowest check \(Int(slowest * 1000)) ms while the key endpoint hung")
        print("hanging keys: checks median \(milliseconds(median(checkResults.map(\.seconds)))) ms, slowest \(milliseconds(slowest)) ms")

        let signInResults = try signIns.flatMap { try results($0) }
        #expect(signInResults.count == 40)
        #expect(signInResults.allSatisfy { $0.status == 503 }, "\(signInResults.map(\.status))")
        // Bounded: the first ones wait the 1 s for the fetch, the rest are refused at once, whatever their queueing.
        let longest = signInResults.map(\.seconds).max() ?? .infinity
        #expect(longest < 2.5, "a sign-in took \(longest) s with KEY_WAIT 1s")
        print("hanging keys: sign-ins all 503, slowest \(milliseconds(longest)) ms")
        let answered = try String(contentsOfFile: "\(work)/signin-0.body-4", encoding: .utf8)
        #expect(answered.contains(#""error":"temporarily_unavailable""#), "\(answered)")
        #expect(google.requests.filter { $0.path == "/certs" }.count == 1, "one fetch, shared, still hanging")
        #expect(try stack.count("signin.users WHERE google_sub LIKE 'isokeys-user%'") == 0)
        try? FileManager.default.removeItem(atPath: work)
    }
}

/// A session of a newly signed-in user (keys from the stack's JWKS file).
private func sessionToken(_ stack: Stack, sub: String) throws -> String {
    let answer = try stack.signIn(try stack.token(sub: sub))
    guard answer.status == 200, let token = (answer.json["session"] as? [String: Any])?["token"] as? String else {
        throw StackError("sign-in failed: \(answer)")
    }
    return token
}

private func workFolder(_ stack: Stack) throws -> String {
    let work = stack.directory.appendingPathComponent("load").path
    try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    return work
}

private struct Load {
    var pid: pid_t
    var codes: String
}

/// One client: a curl process making `transfers` requests on one kept connection (a body each, or a GET with
/// the bearer session when nil), writing "status seconds" per transfer.
private func spawnLoad(_ stack: Stack, work: String, name: String, path: String, bearer: String? = nil,
                       transfers: [String?], rate: String? = nil) throws -> Load {
    let entries = transfers.enumerated().map { index, body in
        curlEntry(url: "https://127.0.0.1:\(stack.port)\(path)",
                  headers: body == nil ? ["Authorization: Bearer \(bearer ?? "")"] : ["Content-Type: application/json"],
                  data: body, output: "\(work)/\(name).body-\(index)", rate: index == 0 ? rate : nil,
                  writeOut: "%{http_code} %{time_total}\\n")
    }
    try entries.joined(separator: "next\n").write(toFile: "\(work)/\(name).curl", atomically: true, encoding: .utf8)
    let codes = "\(work)/\(name).codes"
    return Load(pid: try spawnCurl(config: "\(work)/\(name).curl", codes: codes), codes: codes)
}

/// Each transfer's status and total time, in order.
private func results(_ load: Load) throws -> [(status: Int, seconds: Double)] {
    try String(contentsOfFile: load.codes, encoding: .utf8).split(separator: "\n").map { line in
        let fields = line.split(separator: " ")
        return (Int(fields.first ?? "") ?? 0, fields.count > 1 ? Double(fields[1]) ?? .infinity : .infinity)
    }
}

private func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
private func milliseconds(_ seconds: Double) -> String { String(format: "%.1f", seconds * 1000) }
