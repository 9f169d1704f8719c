// The key cache's rules: freshness, refresh ahead, rotation, unknown-kid refetch and cooldown, stale grace,
// single flight, and the HTTP fetcher's limits, against a scripted loader and a real local HTTP server.
import Foundation
import Testing
@testable import GoogleKeys
import IDToken

private typealias F = KeyCacheFixtures

private func settings(_ edit: (inout KeyCache.Settings) -> Void = { _ in }) -> KeyCache.Settings {
    var settings = KeyCache.Settings()
    settings.minimumLifetime = .zero
    edit(&settings)
    return settings
}

private func cache(_ loader: ScriptedLoader, _ clock: ManualClock, _ settings: KeyCache.Settings = settings()) -> KeyCache {
    KeyCache(settings: settings, clock: clock.now, fileSource: false, load: loader.load)
}

private func keysUnavailable(_ body: () throws(IDTokenError) -> KeySet) -> IDTokenError? {
    do { _ = try body(); return nil } catch { return error }
}

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
        ("http://127.0.0.1:8080/certs", true),
        ("http://localhost/certs", true),
        ("http://[::1]:9000/certs", true),
        ("http://www.googleapis.com/oauth2/v3/certs", false),
        ("http://127.0.0.1@evil.example/certs", false),
        ("ftp://127.0.0.1/certs", false),
        ("file:///etc/passwd", false),
        ("not a url", false),
        ("https://user@www.googleapis.com/oauth2/v3/certs", false),
        ("https://accounts.google.com:pw@evil.example/certs", false),
        ("http://localhost.evil.example/certs", false),
        ("https://", false),
        ("https://:443/certs", false),
        ("https://exa mple.com/", false),
        ("https://ex\u{E4}mple.com/certs", false),
        ("www.googleapis.com/oauth2/v3/certs", false),
        ("HTTPS://keys.example:8443/jwks?x=1", true),
    ])
    func onlyHTTPSOrLoopbackHTTPIsAllowed(url: String, allowed: Bool) {
        #expect((KeySource.url(url).configurationProblem == nil) == allowed)
    }

    @Test func defaultsAreDocumented() {
        let defaults = KeyCache.Settings()
        #expect(defaults.maxBodyBytes == 1 << 20)
        #expect(defaults.unknownKidCooldown == .seconds(60))
        #expect(defaults.staleGrace == .seconds(86_400))
        #expect(KeySource.google == .url("https://www.googleapis.com/oauth2/v3/certs"))
    }

    @Test func keysAreServedForMaxAgeWithoutRefetching() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        let keys = cache(loader, clock, settings { $0.refreshAheadFraction = 0 })
        #expect(try keys.currentKeys().keyIDs == ["a"])
        loader.answer(kids: ["b"], freshFor: 100)
        clock.advance(99)
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(loader.calls == 1)
        clock.advance(1)
        #expect(try keys.currentKeys().keyIDs == ["b"])
        #expect(loader.calls == 2)
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

    @Test func nearExpiryARequestIsServedAtOnceWhileABackgroundRefreshRuns() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        let keys = cache(loader, clock)  // refresh ahead in the last 10 s
        _ = try keys.currentKeys()
        clock.advance(89)
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(loader.calls == 1)

        loader.answer(kids: ["b"], freshFor: 100)
        loader.close()
        clock.advance(2)
        #expect(try keys.currentKeys().keyIDs == ["a"])  // returned although the refresh is blocked
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(eventually { loader.calls == 2 })
        #expect(keys.status.refreshing)
        loader.open()
        #expect(eventually { !keys.status.refreshing })
        #expect(try keys.currentKeys().keyIDs == ["b"])
        #expect(loader.calls == 2)
    }

    @Test func afterExpiryOneRequestWaitsForTheRefetchWhileOthersGetTheOldKeys() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        let keys = cache(loader, clock, settings { $0.refreshAheadFraction = 0 })
        _ = try keys.currentKeys()
        loader.answer(kids: ["b"], freshFor: 100)
        loader.close()
        clock.advance(100)
        let waited = DispatchSemaphore(value: 0)
        let waiter = Thread { #expect((try? keys.currentKeys().keyIDs) == ["b"]); waited.signal() }
        waiter.start()
        #expect(eventually { loader.calls == 2 })
        #expect(try keys.currentKeys().keyIDs == ["a"])  // not blocked behind the refetch
        loader.open()
        waited.wait()
        #expect(try keys.currentKeys().keyIDs == ["b"])
        #expect(loader.calls == 2)
    }

    @Test func unknownKidRefetchesOnceAndTheCooldownPreventsASecond() {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 3600)
        let keys = cache(loader, clock, settings { $0.unknownKidCooldown = .seconds(60) })
        #expect(F.kidWasFound(keys.verify(F.token(kid: "a"), with: F.verifier, now: 1500)))
        #expect(loader.calls == 1)

        loader.answer(kids: ["a", "new"], freshFor: 3600)
        #expect(F.kidWasFound(keys.verify(F.token(kid: "new"), with: F.verifier, now: 1500)))
        #expect(loader.calls == 2)
        #expect(keys.verify(F.token(kid: "bogus"), with: F.verifier, now: 1500) == .failure(IDTokenError(.unknownKid)))
        #expect(keys.verify(F.token(kid: "bogus2"), with: F.verifier, now: 1500) == .failure(IDTokenError(.unknownKid)))
        #expect(loader.calls == 2)
        clock.advance(60)
        #expect(keys.verify(F.token(kid: "bogus"), with: F.verifier, now: 1500) == .failure(IDTokenError(.unknownKid)))
        #expect(loader.calls == 3)
        #expect(keys.status.unknownKidRefetches == 2)
    }

    @Test func aFloodOfBogusKidsCostsOneFetch() {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 3600)
        let keys = cache(loader, clock)
        _ = try? keys.currentKeys()
        onThreads(50) { index in
            let result = keys.verify(F.token(kid: "bogus\(index)"), with: F.verifier, now: 1500)
            #expect(result == .failure(IDTokenError(.unknownKid)))
        }
        #expect(loader.calls == 2)
    }

    @Test func aFailedUnknownKidRefetchIsRetryable() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 3600)
        let keys = cache(loader, clock)
        _ = try? keys.currentKeys()
        loader.fail(.transport("down"))
        let result = keys.verify(F.token(kid: "new"), with: F.verifier, now: 1500)
        #expect(result == .failure(IDTokenError(.keysUnavailable)))
        #expect(try keys.currentKeys().keyIDs == ["a"])  // the good keys stay
    }

    @Test func lastGoodKeysAreServedWithinGraceThenKeysUnavailable() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        let keys = cache(loader, clock, settings {
            $0.staleGrace = .seconds(1000)
            $0.failureRetryInterval = .seconds(10)
        })
        _ = try keys.currentKeys()
        loader.fail()
        clock.advance(100)
        #expect(try keys.currentKeys().keyIDs == ["a"])  // expired, refetch failed: stale but served
        #expect(loader.calls == 2)
        #expect(keys.status.isStale)
        #expect(keys.status.lastError == IDTokenError(.keysUnavailable))
        clock.advance(5)
        _ = try keys.currentKeys()
        #expect(loader.calls == 2)  // within the retry interval: no new fetch
        clock.advance(894)
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(loader.calls == 3)
        clock.advance(100)  // 999 s past expiry: the last instant of grace
        #expect(try keys.currentKeys().keyIDs == ["a"])
        clock.advance(1)
        let error = keysUnavailable { () throws(IDTokenError) in try keys.currentKeys() }
        #expect(error == IDTokenError(.keysUnavailable))
        #expect(error?.isRetryable == true)
        #expect(keys.verify(F.token(kid: "a"), with: F.verifier, now: 1500) == .failure(IDTokenError(.keysUnavailable)))
    }

    @Test func keysComeBackAfterTheSourceRecovers() throws {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.fail()
        let keys = cache(loader, clock, settings { $0.failureRetryInterval = .seconds(10) })
        #expect(keysUnavailable { () throws(IDTokenError) in try keys.currentKeys() } == IDTokenError(.keysUnavailable))
        loader.answer(kids: ["a"], freshFor: 100)
        #expect(keysUnavailable { () throws(IDTokenError) in try keys.currentKeys() } == IDTokenError(.keysUnavailable))
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
        #expect(keys.status.lastError == IDTokenError(.keysUnavailable))
    }

    @Test func coldCacheConcurrentVerificationsShareOneFetch() {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        loader.close()
        let keys = cache(loader, clock)
        let opener = Thread { usleep(200_000); loader.open() }
        opener.start()
        onThreads(100) { _ in
            #expect(F.kidWasFound(keys.verify(F.token(kid: "a"), with: F.verifier, now: 1500)))
        }
        #expect(loader.calls == 1)
    }

    @Test func startLoadsInTheBackground() {
        let loader = ScriptedLoader(), clock = ManualClock()
        loader.answer(kids: ["a"], freshFor: 100)
        let keys = cache(loader, clock)
        keys.start()
        #expect(eventually { keys.status.keyCount == 1 })
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
        #expect(F.kidWasFound(keys.verify(F.token(kid: "b"), with: F.verifier, now: 1500)))
        #expect(keys.status.fetches == 2)
    }

    @Test func aMissingFileIsKeysUnavailable() {
        let keys = KeyCache(source: .file("/nonexistent/keycache.json"), settings: settings())
        #expect(keysUnavailable { () throws(IDTokenError) in try keys.currentKeys() } == IDTokenError(.keysUnavailable))
    }
}

/// The real libcurl fetcher against a real HTTP server on 127.0.0.1.
@Suite struct KeyCacheHTTPTests {
    private func limits(_ maxBody: Int = 1 << 20, timeout: Int = 5000) -> FetchLimits {
        FetchLimits(maxBodyBytes: maxBody, connectTimeoutMilliseconds: 2000, totalTimeoutMilliseconds: timeout)
    }

    @Test func fetcherCapturesBodyAndHonoursMaxAgeMinusAge() throws {
        let server = try KeyCacheTestServer()
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
        #expect(server.count("certs") == 3)
    }

    @Test func rotatedKeysAreUsedAfterExpiry() throws {
        let server = try KeyCacheTestServer()
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["old"]), headers: ["Cache-Control: public, max-age=1"])
        let keys = KeyCache(source: .url(server.url("certs")), settings: settings { $0.refreshAheadFraction = 0 })
        #expect(try keys.currentKeys().keyIDs == ["old"])
        try server.set("certs", body: F.jwks(["new"]), headers: ["Cache-Control: public, max-age=1"])
        #expect(try keys.currentKeys().keyIDs == ["old"])
        usleep(1_100_000)
        #expect(try keys.currentKeys().keyIDs == ["new"])
        #expect(server.count("certs") == 2)
    }

    @Test func unknownKidTriggersExactlyOneRefetchAndTheCooldownASecond() throws {
        let server = try KeyCacheTestServer()
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["a"]), headers: ["Cache-Control: public, max-age=3600"])
        let keys = KeyCache(source: .url(server.url("certs")), settings: settings())
        #expect(F.kidWasFound(keys.verify(F.token(kid: "a"), with: F.verifier, now: 1500)))
        #expect(server.count("certs") == 1)
        try server.set("certs", body: F.jwks(["a", "b"]), headers: ["Cache-Control: public, max-age=3600"])
        #expect(F.kidWasFound(keys.verify(F.token(kid: "b"), with: F.verifier, now: 1500)))
        #expect(server.count("certs") == 2)
        #expect(keys.verify(F.token(kid: "c"), with: F.verifier, now: 1500) == .failure(IDTokenError(.unknownKid)))
        #expect(server.count("certs") == 2)
    }

    @Test(arguments: [500, 503])
    func staleIfErrorWithinGraceThenKeysUnavailable(status: Int) throws {
        let server = try KeyCacheTestServer()
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["a"]), headers: ["Cache-Control: max-age=10"])
        let clock = ManualClock()
        let keys = KeyCache(source: .url(server.url("certs")),
                            settings: settings { $0.staleGrace = .seconds(100); $0.failureRetryInterval = .zero }, clock: clock.now)
        _ = try keys.currentKeys()
        try server.set("certs", body: "oops", status: status)
        clock.advance(10)
        #expect(try keys.currentKeys().keyIDs == ["a"])
        #expect(server.count("certs") == 2)
        server.stop()  // and now the server is gone altogether
        clock.advance(50)
        #expect(try keys.currentKeys().keyIDs == ["a"])
        clock.advance(50)
        #expect(keysUnavailable { () throws(IDTokenError) in try keys.currentKeys() } == IDTokenError(.keysUnavailable))
    }

    @Test func coldStartWithTheServerDownIsKeysUnavailableNotAnInvalidToken() throws {
        let server = try KeyCacheTestServer()
        let url = server.url("certs")
        server.stop()
        let keys = KeyCache(source: .url(url), settings: settings())
        let result = keys.verify(F.token(kid: "a"), with: F.verifier, now: 1500)
        #expect(result == .failure(IDTokenError(.keysUnavailable)))
        if case .failure(let error) = result { #expect(error.isRetryable) }
        #expect(throws: KeyFetchFailure.self) { try KeyFetch.document(url: url, limits: limits()) }
    }

    @Test func hundredConcurrentVerificationsOnAColdCacheMakeOneRequest() throws {
        let server = try KeyCacheTestServer()
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["a"]), headers: ["Cache-Control: max-age=3600"], delay: 0.3)
        let keys = KeyCache(source: .url(server.url("certs")), settings: settings())
        onThreads(100) { _ in
            #expect(F.kidWasFound(keys.verify(F.token(kid: "a"), with: F.verifier, now: 1500)))
        }
        #expect(server.count("certs") == 1)
    }

    @Test(arguments: [true, false])
    func aBodyOverTheLimitIsRefused(sendLength: Bool) throws {
        let server = try KeyCacheTestServer()
        defer { server.stop() }
        try server.set("big", body: String(repeating: "x", count: 5000), sendLength: sendLength)
        #expect(throws: KeyFetchFailure.bodyTooLarge(limit: 4096)) { try KeyFetch.document(url: server.url("big"), limits: limits(4096)) }
        #expect(try KeyFetch.document(url: server.url("big"), limits: limits(5000)).body.count == 5000)
    }

    @Test func theDefaultLimitRefusesAMegabytePlusOne() throws {
        let server = try KeyCacheTestServer()
        defer { server.stop() }
        try server.set("big", body: String(repeating: "x", count: (1 << 20) + 1), sendLength: false)
        let keys = KeyCache(source: .url(server.url("big")))
        let error = keysUnavailable { () throws(IDTokenError) in try keys.currentKeys() }
        #expect(error == IDTokenError(.keysUnavailable))
        #expect(error?.detail == KeyFetchFailure.bodyTooLarge(limit: 1 << 20).description)
    }

    @Test(arguments: [404, 500, 204, 301, 302])
    func aStatusOtherThan200IsRefusedAndNoRedirectIsFollowed(status: Int) throws {
        let server = try KeyCacheTestServer()
        defer { server.stop() }
        try server.set("certs", body: F.jwks(["a"]), status: status, headers: ["Location: \(server.url("target"))"])
        try server.set("target", body: F.jwks(["a"]))
        #expect(throws: KeyFetchFailure.status(status)) { try KeyFetch.document(url: server.url("certs"), limits: limits()) }
        #expect(server.count("target") == 0)
    }

    @Test func aSlowServerTimesOut() throws {
        let server = try KeyCacheTestServer()
        defer { server.stop() }
        try server.set("slow", body: F.jwks(["a"]), delay: 3)
        let started = Date()
        #expect {
            try KeyFetch.document(url: server.url("slow"), limits: limits(timeout: 300))
        } throws: { error in
            guard case KeyFetchFailure.transport = error else { return false }
            return true
        }
        #expect(Date().timeIntervalSince(started) < 2)
    }

    @Test func httpsIsFetchedAndTheServerCertificateIsVerified() throws {
        let server = try KeyCacheTestServer(tls: true)
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
