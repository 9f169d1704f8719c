// The key cache's rules: freshness, background refresh, rotation, the unknown-kid refetch and its cooldown, stale
// grace, single flight, bounded waits on a hanging endpoint, and the HTTP fetcher's limits, against a scripted
// loader and a real local HTTP server.
import Foundation
import GoogleKeys
@testable import IDToken
import Testing
import TestSupport

private typealias F = KeyCacheFixtures

/// Test settings: no lifetime floor, and a `maxWait` long enough to be only a failure bound (a test that means a
/// short wait sets one).
private func settings(_ edit: (inout KeyCache.Settings) -> Void = { _ in }) -> KeyCache.Settings {
    var settings = KeyCache.Settings()
    settings.minimumLifetime = .zero
    settings.maxWait = .seconds(30)
    edit(&settings)
    return settings
}

private func cache(_ loader: ScriptedLoader, _ clock: ManualClock, _ settings: KeyCache.Settings = settings()) -> KeyCache {
    KeyCache(settings: settings, clock: clock.now, fileSource: false, load: loader.load)
}

private func failure(_ body: () throws(IDTokenError) -> KeySet) -> IDTokenError? {
    do { _ = try body(); return nil } catch { return error }
}

/// A `maxWait` far beyond the failure bound of `returnsWithin`: a request that waits on the fetch fails the test.
private let waitingWouldFail: Duration = .seconds(3600)

@Suite struct KeyCacheLogicTests {
    struct FreshnessCase: Sendable, CustomTestStringConvertible {
        var cacheControl: [String]
        var age: [String] = []
        var expected: Int64?
        var testDescription: String { "\(cacheControl) Age \(age) -> \(expected.map(String.init) ?? "none")" }
    }

    @Test(arguments: [
        FreshnessCase(cacheControl: ["public, max-age=100"], age: ["30"], expected: 70),
        FreshnessCase(cacheControl: ["public, max-age=100"], expected: 100),
        FreshnessCase(cacheControl: ["max-age=100", "must-revalidate"], age: ["0"], expected: 100),
        FreshnessCase(cacheControl: ["public, max-age=\"50\""], expected: 50),
        FreshnessCase(cacheControl: ["public,max-age=100\t"], age: [" 10 "], expected: 90),
        FreshnessCase(cacheControl: ["public, max-age=100"], age: ["250"], expected: 0),
        FreshnessCase(cacheControl: ["no-cache, max-age=100"], expected: 0),
        FreshnessCase(cacheControl: ["no-store"], expected: 0),
        FreshnessCase(cacheControl: ["max-age=soon"], expected: 0),
        FreshnessCase(cacheControl: ["public"], age: ["10"], expected: nil),
        FreshnessCase(cacheControl: [], expected: nil),
    ])
    func freshnessIsMaxAgeMinusAge(_ example: FreshnessCase) {
        #expect(KeyFetch.freshness(cacheControl: example.cacheControl, age: example.age) == example.expected)
    }

    @Test(arguments: [
        ("https://www.googleapis.com/oauth2/v3/certs", true),
        ("HTTPS://keys.example:8443/jwks?x=1", true),
        ("http://127.0.0.1:8080/certs", true),
        ("http://localhost/certs", true),
        ("http://[::1]:9000/certs", true),
        ("http://www.googleapis.com/oauth2/v3/certs", false),
        ("http://127.0.0.1@evil.example/certs", false),
        ("https://user@www.googleapis.com/oauth2/v3/certs", false),
        ("https://accounts.google.com:pw@evil.example/certs", false),
        ("http://localhost.evil.example/certs", false),
        ("ftp://127.0.0.1/certs", false),
        ("file:///etc/passwd", false),
        ("https://", false),
        ("https://:443/certs", false),
        ("https://exa mple.com/", false),
        ("https://ex\u{E4}mple.com/certs", false),
        ("www.googleapis.com/oauth2/v3/certs", false),
        ("not a url", false),
    ])
    func onlyHTTPSOrLoopbackHTTPIsAllowed(url: String, allowed: Bool) {
        #expect((KeySource.urlProblem(url) == nil) == allowed)
        #expect((KeySource.url(url).configurationProblem == nil) == allowed)
    }

    @Test func defaultsAreDocumented() {
        let defaults = KeyCache.Settings()
        #expect(defaults.maxBodyBytes == 1 << 20)
        #expect(defaults.unknownKidCooldown == .seconds(60))
        #expect(defaults.failureRetryInterval == .seconds(10))
        #expect(defaults.staleGrace == .seconds(86_400))
        #expect(defaults.maxWait == .seconds(1))
        #expect(KeySource.google == .url("https://www.googleapis.com/oauth2/v3/certs"))
    }

    @Test func keysAreServedForMaxAgeThenRefreshedInTheBackground() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        let keys = cache(loader, clock, settings { $0.refreshAheadFraction = 0 })
        #expect(try keys.currentKeys().keyIDs == ["a"])
        loader.answer(kids: ["b"], freshFor: 100)
        clock.advance(99)
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(loader.calls == 1)
        clock.advance(1)
        #expect(try keys.currentKeys().keyIDs == ["a"])  // expired: served while the refresh runs
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(try keys.currentKeys().keyIDs == ["b"])
        #expect(loader.calls == 2)
    }

    /// An idle responder's keys: no request comes to refresh them, `/readyz`'s probe does (`refreshIfDue`), in the
    /// background, once per due time, never while fresh.
    @Test func aProbeRefreshesDueKeysWithoutARequest() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        let keys = cache(loader, clock, settings { $0.refreshAheadFraction = 0.1 })
        keys.refreshIfDue()
        #expect(keys.awaitFetch(timeout: .seconds(30)) && loader.calls == 1, "not loaded: loads")
        keys.refreshIfDue()
        #expect(loader.calls == 1, "fresh: nothing to do")
        loader.answer(kids: ["b"], freshFor: 100)
        loader.hold()
        clock.advance(200)  // stale: a request would refresh them, none comes
        keys.refreshIfDue()
        #expect(loader.waitForCalls(2))
        keys.refreshIfDue()
        loader.release()
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(loader.calls == 2, "one fetch at a time")
        #expect(try keys.currentKeys().keyIDs == ["b"] && !keys.status.isStale)
    }

    @Test func lifetimeIsClampedToTheConfiguredBounds() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 0)
        let keys = cache(loader, clock, settings {
            $0.minimumLifetime = .seconds(60)
            $0.maximumLifetime = .seconds(120)
            $0.refreshAheadFraction = 0
        })
        _ = try keys.currentKeys()
        clock.advance(59)
        _ = try keys.currentKeys()
        #expect(loader.calls == 1)
        loader.answer(kids: ["a"], freshFor: 100_000)
        clock.advance(1)
        _ = try keys.currentKeys()
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(loader.calls == 2)
        let status = keys.status
        #expect(status.expiresAt.map { $0 - status.lastAttemptAt! } == .seconds(120))
    }

    @Test func missingMaxAgeUsesTheDefaultLifetime() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: nil)
        let keys = cache(loader, clock, settings { $0.defaultLifetime = .seconds(30) })
        _ = try keys.currentKeys()
        let status = keys.status
        #expect(status.expiresAt.map { $0 - status.lastAttemptAt! } == .seconds(30))
    }

    @Test func nearExpiryARequestIsServedAtOnceWhileABackgroundRefreshHangs() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        let keys = cache(loader, clock, settings { $0.maxWait = waitingWouldFail })  // refresh ahead in the last 10 s
        _ = try keys.currentKeys()
        clock.advance(89)
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(loader.calls == 1)

        loader.answer(kids: ["b"], freshFor: 100)
        loader.hold()
        clock.advance(2)
        #expect(returnsWithin { F.verify(keys, kid: "a") } == "ok")
        #expect(returnsWithin { F.verify(keys, kid: "a") } == "ok")
        #expect(loader.waitForCalls(2))
        #expect(keys.status.refreshing)
        loader.release()
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(try keys.currentKeys().keyIDs == ["b"])
        #expect(loader.calls == 2)
    }

    @Test func staleKeysWithAHangingEndpointAreServedWithoutWaitingAndOneFetchRuns() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        let keys = cache(loader, clock, settings {
            $0.refreshAheadFraction = 0
            $0.failureRetryInterval = .seconds(10)
            $0.maxWait = waitingWouldFail
        })
        _ = try keys.currentKeys()
        loader.answer(kids: ["b"], freshFor: 100)
        loader.hold()
        clock.advance(100)
        let outcomes = onThreads(8) { _ in returnsWithin { F.verify(keys, kid: "a") } }
        #expect(outcomes.allSatisfy { $0 == "ok" })
        // A retry cycle later the fetch still hangs: still served, and no second fetch beside it.
        clock.advance(11)
        #expect(returnsWithin { F.verify(keys, kid: "a") } == "ok")
        #expect(loader.waitForCalls(2))
        #expect(loader.calls == 2 && keys.status.fetches == 2)
        loader.release()
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(try keys.currentKeys().keyIDs == ["b"])
    }

    @Test func coldStartWithAHangingEndpointIsKeysUnavailableAfterMaxWait() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        loader.hold()
        let keys = cache(loader, clock, settings { $0.maxWait = .milliseconds(50) })
        let outcomes = onThreads(4) { _ in returnsWithin { F.verify(keys, kid: "a") } }
        #expect(outcomes == Array(repeating: "keys_unavailable", count: 4))
        #expect(loader.calls == 1)  // one fetch, shared, still running
        #expect(keys.status.refreshing)
        loader.release()
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(F.verify(keys, kid: "a") == "ok")
        #expect(loader.calls == 1)
    }

    @Test func aRequestJoiningAFetchOlderThanMaxWaitIsAnsweredAtOnce() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        loader.hold()
        let keys = cache(loader, clock, settings { $0.maxWait = .seconds(3) })
        // The first request starts the fetch and waits for it its full maxWait.
        #expect(returnsWithin { F.verify(keys, kid: "a") } == "keys_unavailable")
        // The fetch is still hanging: later requests do not wait another maxWait each (which would hold a
        // worker 3 s per request), they are refused at once; 1 s is only a failure bound.
        for _ in 0..<5 {
            #expect(returnsWithin(1) { F.verify(keys, kid: "a") } == "keys_unavailable")
        }
        #expect(loader.calls == 1 && keys.status.refreshing)
        loader.release()
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(F.verify(keys, kid: "a") == "ok")
    }

    @Test func unknownKidRefetchesOnceAndTheCooldownPreventsASecond() {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 3600)
        let keys = cache(loader, clock, settings { $0.unknownKidCooldown = .seconds(60) })
        #expect(F.verify(keys, kid: "a") == "ok")
        #expect(loader.calls == 1)

        loader.answer(kids: ["a", "new"], freshFor: 3600)
        #expect(F.verify(keys, kid: "new") == "ok")
        #expect(loader.calls == 2)
        #expect(F.verify(keys, kid: "bogus") == "unknown_kid")
        #expect(F.verify(keys, kid: "bogus2") == "unknown_kid")
        #expect(loader.calls == 2)
        clock.advance(60)
        #expect(F.verify(keys, kid: "bogus") == "unknown_kid")
        #expect(loader.calls == 3)
        #expect(keys.status.unknownKidRefetches == 2)
    }

    @Test func securityEventTokensGetTheSameUnknownKidRefetch() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 3600)
        let keys = cache(loader, clock)
        let verifier = SecurityEventVerifier(policy: Policy(clientIDs: ["client"]))
        func event(kid: String) -> Result<AcceptedSecurityEvent, IDTokenError> {
            let payload = #"{"iss":"https://accounts.google.com/","aud":"client","iat":1400,"jti":"j1","events":{"\#(SecurityEvent.sessionsRevoked)":{"subject":{"subject_type":"iss-sub","iss":"https://accounts.google.com/","sub":"7"}}}}"#
            let token = F.key.sign(headerJSON: #"{"alg":"RS256","kid":"\#(kid)","typ":"secevent+jwt"}"#, payloadJSON: payload)
            return keys.verify(token, with: verifier, now: F.now)
        }
        #expect(try event(kid: "a").get().verified?.events.first?.subject == SecurityEvent.Subject(issuer: "https://accounts.google.com/", sub: "7"))
        loader.answer(kids: ["a", "rotated"], freshFor: 3600)
        #expect(try event(kid: "rotated").get().verified?.keyID == "rotated")
        #expect(event(kid: "made-up") == .failure(IDTokenError(.unknownKid)))
        #expect(loader.calls == 2 && keys.status.unknownKidRefetches == 1)
        // And an ID token is no security event, whatever the cache.
        #expect(keys.verify(F.token(kid: "a"), with: verifier, now: F.now) == .failure(IDTokenError(.notASecurityEvent)))
    }

    @Test func unknownKidDuringAFetchInFlightIsRefusedAtOnce() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        let keys = cache(loader, clock, settings { $0.maxWait = waitingWouldFail })
        _ = try keys.currentKeys()
        loader.hold()
        clock.advance(95)  // the refresh window: a background refresh starts, and hangs
        #expect(F.verify(keys, kid: "a") == "ok")
        #expect(loader.waitForCalls(2))
        #expect(returnsWithin { F.verify(keys, kid: "made-up") } == "unknown_kid")
        #expect(loader.calls == 2 && keys.status.unknownKidRefetches == 0)
        loader.release()
    }

    @Test func unknownKidDuringTheCooldownIsRefusedAtOnceWithoutAFetch() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 3600)
        let keys = cache(loader, clock, settings { $0.maxWait = waitingWouldFail })
        #expect(F.verify(keys, kid: "first-made-up") == "unknown_kid")  // cold load, then one refetch
        #expect(loader.calls == 2)
        loader.hold()  // a fetch now would hang the request
        clock.advance(59)
        #expect(returnsWithin { F.verify(keys, kid: "second-made-up") } == "unknown_kid")
        #expect(loader.calls == 2)
        loader.release()
    }

    @Test func anUnknownKidWaitsForItsRefetchAtMostMaxWait() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 3600)
        let keys = cache(loader, clock, settings { $0.maxWait = .milliseconds(50) })
        _ = returnsWithin { try? keys.currentKeys() }
        #expect(keys.status.keyCount == 1)
        loader.answer(kids: ["a", "new"], freshFor: 3600)
        loader.hold()
        #expect(returnsWithin { F.verify(keys, kid: "new") } == "keys_unavailable")  // retryable: the refetch runs on
        #expect(returnsWithin { F.verify(keys, kid: "other") } == "unknown_kid")     // the refetch is in flight
        #expect(loader.calls == 2)
        loader.release()
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(F.verify(keys, kid: "new") == "ok")
        #expect(loader.calls == 2)
    }

    @Test func madeUpKidsWithASlowEndpointHoldNoWorker() throws {
        // The fault test: four tokens with made-up kids while the endpoint hangs. One starts the refetch and
        // waits maxWait; the others are refused at once.
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 3600)
        let keys = cache(loader, clock, settings { $0.maxWait = .milliseconds(50) })
        _ = try keys.currentKeys()
        loader.hold()
        let outcomes = onThreads(4) { index in returnsWithin { F.verify(keys, kid: "made-up-\(index)") } }
        #expect(outcomes.filter { $0 == "keys_unavailable" }.count == 1)
        #expect(outcomes.filter { $0 == "unknown_kid" }.count == 3)
        #expect(loader.calls == 2 && keys.status.unknownKidRefetches == 1)
        loader.release()
    }

    @Test func aFloodOfBogusKidsCostsOneFetch() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 3600)
        let keys = cache(loader, clock)
        _ = try keys.currentKeys()
        let outcomes = onThreads(50) { index in F.verify(keys, kid: "bogus\(index)") }
        #expect(outcomes == Array(repeating: "unknown_kid", count: 50))
        #expect(loader.calls == 2)
    }

    @Test func aFailedUnknownKidRefetchIsRetryable() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 3600)
        let keys = cache(loader, clock)
        _ = try keys.currentKeys()
        loader.fail(.transport("down"))
        #expect(F.verify(keys, kid: "new") == "keys_unavailable")
        #expect(try keys.currentKeys().keyIDs == ["a"])  // the good keys stay
        #expect(loader.calls == 2)
    }

    @Test func anUnknownKidSoonAfterAFailedFetchIsRefusedWithoutAFetch() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        let keys = cache(loader, clock, settings { $0.refreshAheadFraction = 0; $0.failureRetryInterval = .seconds(10) })
        _ = try keys.currentKeys()
        loader.fail()
        clock.advance(100)
        _ = try keys.currentKeys()  // expired: the background refresh fails
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(loader.calls == 2 && keys.status.lastError == IDTokenError(.keysUnavailable))
        clock.advance(5)
        #expect(F.verify(keys, kid: "made-up") == "unknown_kid")
        #expect(loader.calls == 2)
    }

    @Test func lastGoodKeysAreServedWithinGraceThenKeysUnavailable() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        let keys = cache(loader, clock, settings {
            $0.staleGrace = .seconds(1000)
            $0.failureRetryInterval = .seconds(10)
            $0.refreshAheadFraction = 0
        })
        _ = try keys.currentKeys()
        loader.fail()
        clock.advance(100)
        #expect(try keys.currentKeys().keyIDs == ["a"])  // expired: served while the refresh runs (and fails)
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(loader.calls == 2)
        #expect(keys.status.isStale)
        #expect(keys.status.lastError == IDTokenError(.keysUnavailable))
        clock.advance(5)
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(loader.calls == 2)  // within the retry interval: no new fetch
        clock.advance(894)
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(loader.calls == 3)
        clock.advance(100)  // 999 s past expiry: the last second of grace
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        clock.advance(1)
        let error = failure { () throws(IDTokenError) in try keys.currentKeys() }
        #expect(error == IDTokenError(.keysUnavailable))
        #expect(error?.isRetryable == true)
        #expect(F.verify(keys, kid: "a") == "keys_unavailable")
    }

    @Test func keysComeBackAfterTheSourceRecovers() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.fail()
        let keys = cache(loader, clock, settings { $0.failureRetryInterval = .seconds(10) })
        #expect(failure { () throws(IDTokenError) in try keys.currentKeys() } == IDTokenError(.keysUnavailable))
        loader.answer(kids: ["a"], freshFor: 100)
        #expect(failure { () throws(IDTokenError) in try keys.currentKeys() } == IDTokenError(.keysUnavailable))
        #expect(loader.calls == 1)  // cold and failing: still at most one fetch per retry interval
        clock.advance(10)
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(keys.status.lastError == nil)
    }

    @Test(arguments: [#"{"keys":[]}"#, "not json", #"{"keys":[{"kty":"RSA"}]}"#])
    func anUnusableKeySetKeepsTheLastGoodKeys(body: String) throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        let keys = cache(loader, clock)
        _ = try keys.currentKeys()
        loader.answerRaw(body)
        clock.advance(100)
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(keys.status.lastError == IDTokenError(.keysUnavailable))
    }

    @Test func coldCacheConcurrentVerificationsShareOneFetch() {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        loader.hold()
        let keys = cache(loader, clock)
        let outcomes = onThreads(100, whenAllStarted: {
            _ = loader.waitForCalls(1)
            loader.release()
        }) { index in
            // Half of them carry a signature of another key: found, and refused for it.
            F.code(keys.verify(index % 2 == 0 ? F.token(kid: "a") : F.forgedToken(kid: "a"), with: F.verifier, now: F.now))
        }
        #expect(outcomes.filter { $0 == "ok" }.count == 50)
        #expect(outcomes.filter { $0 == "bad_signature" }.count == 50)
        #expect(loader.calls == 1)
    }

    @Test func startLoadsInTheBackground() {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        let keys = cache(loader, clock)
        keys.start()
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(keys.status.keyCount == 1)
        keys.start()
        #expect(loader.calls == 1)
    }

    @Test func aFileSourceIsReadOnceAndReReadForAnUnknownKid() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("keycache-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try F.jwks(["a"]).write(toFile: path, atomically: true, encoding: .utf8)
        let clock = ManualClock()
        let keys = KeyCache(source: .file(path), settings: settings(), clock: clock.now)
        #expect(try keys.currentKeys().keyIDs == ["a"])
        try F.jwks(["a", "b"]).write(toFile: path, atomically: true, encoding: .utf8)
        clock.advance(1_000_000)
        #expect(try keys.currentKeys().keyIDs == ["a"])  // a file never expires by time
        #expect(F.verify(keys, kid: "b") == "ok")
        #expect(keys.status.fetches == 2)
    }

    @Test func aMissingFileIsKeysUnavailable() {
        let keys = KeyCache(source: .file("/nonexistent/keycache.json"), settings: settings())
        #expect(failure { () throws(IDTokenError) in try keys.currentKeys() } == IDTokenError(.keysUnavailable))
        #expect(throws: IDTokenError(.keysUnavailable)) { try KeySource.file("/nonexistent/keycache.json").loadKeySet() }
    }

    @Test func aOneShotLoadParsesTheSetWithoutACache() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("keycache-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try F.jwks(["a", "b"]).write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try KeySource.file(path).loadKeySet().keyIDs == ["a", "b"])
        try #"{"keys":[]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: IDTokenError(.keysUnavailable)) { try KeySource.file(path).loadKeySet() }
    }
}

/// The real libcurl fetcher against a real HTTP server on 127.0.0.1.
@Suite struct KeyCacheHTTPTests {
    private func limits(_ maxBody: Int = 1 << 20, timeout: Int = 5000) -> FetchLimits {
        FetchLimits(maxBodyBytes: maxBody, connectTimeoutMilliseconds: 2000, totalTimeoutMilliseconds: timeout)
    }

    @Test func fetcherCapturesBodyAndHonoursMaxAgeMinusAge() throws {
        let server = try RecordingServer()
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["a"]), headers: ["Cache-Control: public, max-age=100, must-revalidate", "Age: 40"])
        let document = try KeyFetch.document(url: server.url("certs"), limits: limits())
        #expect(document.body == Array(F.jwks(["a"]).utf8))
        #expect(document.freshFor == 60)

        let clock = ManualClock()
        let keys = KeyCache(source: .url(server.url("certs")), settings: settings { $0.refreshAheadFraction = 0 }, clock: clock.now)
        _ = try keys.currentKeys()
        clock.advance(59)
        _ = try keys.currentKeys()
        #expect(server.count("certs") == 2)
        clock.advance(1)
        _ = try keys.currentKeys()
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(server.count("certs") == 3)
    }

    @Test func rotatedKeysAreUsedAfterExpiry() throws {
        let server = try RecordingServer()
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["old"]), headers: ["Cache-Control: public, max-age=1"])
        let clock = ManualClock()
        let keys = KeyCache(source: .url(server.url("certs")), settings: settings { $0.refreshAheadFraction = 0 }, clock: clock.now)
        #expect(try keys.currentKeys().keyIDs == ["old"])
        try server.set("certs", body: F.jwks(["new"]), headers: ["Cache-Control: public, max-age=1"])
        #expect(try keys.currentKeys().keyIDs == ["old"])
        clock.advance(1)
        #expect(try keys.currentKeys().keyIDs == ["old"])  // expired: served while the refresh runs
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(try keys.currentKeys().keyIDs == ["new"])
        #expect(server.count("certs") == 2)
    }

    @Test func unknownKidTriggersExactlyOneRefetchAndTheCooldownASecond() throws {
        let server = try RecordingServer()
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["a"]), headers: ["Cache-Control: public, max-age=3600"])
        let keys = KeyCache(source: .url(server.url("certs")), settings: settings())
        #expect(F.verify(keys, kid: "a") == "ok")
        #expect(server.count("certs") == 1)
        try server.set("certs", body: F.jwks(["a", "b"]), headers: ["Cache-Control: public, max-age=3600"])
        #expect(F.verify(keys, kid: "b") == "ok")
        #expect(server.count("certs") == 2)
        #expect(F.verify(keys, kid: "c") == "unknown_kid")
        #expect(server.count("certs") == 2)
    }

    @Test(arguments: [500, 503])
    func staleIfErrorWithinGraceThenKeysUnavailable(status: Int) throws {
        let server = try RecordingServer()
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["a"]), headers: ["Cache-Control: max-age=10"])
        let clock = ManualClock()
        let keys = KeyCache(source: .url(server.url("certs")),
                            settings: settings { $0.staleGrace = .seconds(100); $0.failureRetryInterval = .zero; $0.refreshAheadFraction = 0 },
                            clock: clock.now)
        _ = try keys.currentKeys()
        try server.set("certs", body: "oops", status: status)
        clock.advance(10)
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        #expect(server.count("certs") == 2)
        #expect(keys.status.lastError?.detail == "HTTP status \(status)")
        server.stop()  // and now the server is gone altogether
        clock.advance(50)
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(keys.awaitFetch(timeout: .seconds(30)))
        clock.advance(50)
        #expect(failure { () throws(IDTokenError) in try keys.currentKeys() } == IDTokenError(.keysUnavailable))
    }

    @Test func coldStartWithTheServerDownIsKeysUnavailableNotAnInvalidToken() throws {
        let server = try RecordingServer()
        let url = server.url("certs")
        server.stop()
        let keys = KeyCache(source: .url(url), settings: settings())
        let result = keys.verify(F.token(kid: "a"), with: F.verifier, now: F.now)
        #expect(result == .failure(IDTokenError(.keysUnavailable)))
        if case .failure(let error) = result { #expect(error.isRetryable) }
        #expect(throws: KeyFetchFailure.self) { try KeyFetch.document(url: url, limits: limits()) }
    }

    @Test func aHangingEndpointAtColdStartHoldsEachRequestAtMostMaxWait() throws {
        let server = try RecordingServer()
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["a"]), headers: ["Cache-Control: max-age=3600"], delay: 60)
        let keys = KeyCache(source: .url(server.url("certs")), settings: settings { $0.maxWait = .milliseconds(100) })
        let outcomes = onThreads(4) { _ in returnsWithin { F.verify(keys, kid: "a") } }
        #expect(outcomes == Array(repeating: "keys_unavailable", count: 4))
        #expect(keys.status.fetches == 1 && keys.status.refreshing)
    }

    @Test func staleKeysAndAHangingEndpointDoNotHoldARequest() throws {
        let server = try RecordingServer()
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["a"]), headers: ["Cache-Control: max-age=100"])
        let clock = ManualClock()
        let keys = KeyCache(source: .url(server.url("certs")), settings: settings { $0.maxWait = waitingWouldFail }, clock: clock.now)
        #expect(F.verify(keys, kid: "a") == "ok")
        try server.set("certs", body: F.jwks(["a"]), headers: ["Cache-Control: max-age=100"], delay: 60)
        clock.advance(150)
        let outcomes = onThreads(4) { _ in returnsWithin { F.verify(keys, kid: "a") } }
        #expect(outcomes == Array(repeating: "ok", count: 4))
        #expect(keys.status.fetches == 2 && keys.status.refreshing && keys.status.isStale)
    }

    @Test func hundredConcurrentVerificationsOnAColdCacheMakeOneRequest() throws {
        let server = try RecordingServer()
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["a"]), headers: ["Cache-Control: max-age=3600"], delay: 0.3)
        let keys = KeyCache(source: .url(server.url("certs")), settings: settings())
        let outcomes = onThreads(100) { index in
            F.code(keys.verify(index % 2 == 0 ? F.token(kid: "a") : F.forgedToken(kid: "a"), with: F.verifier, now: F.now))
        }
        #expect(outcomes.filter { $0 == "ok" }.count == 50)
        #expect(outcomes.filter { $0 == "bad_signature" }.count == 50)
        #expect(server.count("certs") == 1)
    }

    @Test(arguments: [true, false])
    func aBodyOverTheLimitIsRefused(sendLength: Bool) throws {
        let server = try RecordingServer()
        defer { server.stop() }
        try server.set("big", body: String(repeating: "x", count: 5000), sendLength: sendLength)
        #expect(throws: KeyFetchFailure.bodyTooLarge(limit: 4096)) { try KeyFetch.document(url: server.url("big"), limits: limits(4096)) }
        #expect(try KeyFetch.document(url: server.url("big"), limits: limits(5000)).body.count == 5000)
    }

    @Test func theDefaultLimitRefusesAMegabytePlusOne() throws {
        let server = try RecordingServer()
        defer { server.stop() }
        try server.set("big", body: String(repeating: "x", count: (1 << 20) + 1), sendLength: false)
        let keys = KeyCache(source: .url(server.url("big")), settings: settings())
        let error = failure { () throws(IDTokenError) in try keys.currentKeys() }
        #expect(error == IDTokenError(.keysUnavailable))
        #expect(error?.detail == KeyFetchFailure.bodyTooLarge(limit: 1 << 20).description)
    }

    @Test func aFloodOfResponseHeadersIsRefused() throws {
        let server = try RecordingServer()
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["a"]), headers: (0..<2000).map { "X-Filler-\($0): " + String(repeating: "h", count: 40) })
        #expect(throws: KeyFetchFailure.transport("response headers over 65536 bytes")) {
            try KeyFetch.document(url: server.url("certs"), limits: limits())
        }
    }

    @Test(arguments: [404, 500, 204, 301, 302])
    func aStatusOtherThan200IsRefusedAndNoRedirectIsFollowed(status: Int) throws {
        let server = try RecordingServer()
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["a"]), status: status, headers: ["Location: \(server.url("target"))"])
        try server.set("target", body: F.jwks(["a"]))
        #expect(throws: KeyFetchFailure.status(status)) { try KeyFetch.document(url: server.url("certs"), limits: limits()) }
        #expect(server.count("target") == 0)
    }

    @Test func aSlowServerTimesOut() throws {
        let server = try RecordingServer()
        defer { server.stop() }
        try server.set("slow", body: F.jwks(["a"]), delay: 30)
        // Without the timeout the fetch would succeed, 30 s later.
        #expect {
            try KeyFetch.document(url: server.url("slow"), limits: limits(timeout: 300))
        } throws: { error in
            guard case KeyFetchFailure.transport(let message) = error else { return false }
            return message.localizedCaseInsensitiveContains("timeout")
        }
    }

    @Test func httpsIsFetchedAndTheServerCertificateIsVerified() throws {
        let server = try RecordingServer(tls: true)
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["a"]), headers: ["Cache-Control: max-age=100"])
        #expect(server.url("certs").hasPrefix("https://"))
        var trusting = limits()
        trusting.trustedCAFile = server.certificate
        #expect(try KeyFetch.document(url: server.url("certs"), limits: trusting).freshFor == 100)
        #expect {
            try KeyFetch.document(url: server.url("certs"), limits: limits())  // self-signed: not trusted by the system
        } throws: { error in
            guard case KeyFetchFailure.transport = error else { return false }
            return true
        }
        #expect(server.count("certs") == 1)
    }

    @Test func plainHTTPToANonLoopbackHostIsRefusedWithoutAConnection() {
        #expect(throws: KeyFetchFailure.refusedURL("http:// is allowed only to a loopback host; use https://")) {
            try KeyFetch.document(url: "http://www.googleapis.com/oauth2/v3/certs", limits: limits())
        }
    }
}
