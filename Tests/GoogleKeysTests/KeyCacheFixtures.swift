// Shared pieces for the key-cache tests: JWKS documents with chosen kids, signed tokens, a manual clock, a loader
// the test holds and releases, and waits bounded only as a failure limit.
import Foundation
import GoogleKeys
import IDToken
import Signing
import Synchronization

enum KeyCacheFixtures {
    /// One RSA key behind every kid of the documents below, so tokens really verify (or really fail to).
    static let key = try! DevelopmentKey.generate(.rsa2048)

    /// A JWKS listing `kids`, each with `key`'s public key.
    static func jwks(_ kids: [String]) -> String {
        let n = member("n"), e = member("e")
        let keys = kids.map { #"{"kty":"RSA","alg":"RS256","use":"sig","e":"\#(e)","kid":"\#($0)","n":"\#(n)"}"# }
        return #"{"keys":[\#(keys.joined(separator: ","))]}"#
    }

    private static func member(_ name: String) -> String {
        guard let r = key.publicJWK.range(of: "\"\(name)\":\"") else { return "" }
        return String(key.publicJWK[r.upperBound...].prefix { $0 != "\"" })
    }

    static let now: Int64 = 1500
    static let verifier = Verifier(policy: Policy(clientIDs: ["client"]))

    /// A token valid at `now` for `verifier`, signed by `key`, whose header names `kid`.
    static func token(kid: String) -> String {
        key.sign(claims: ["iss": "https://accounts.google.com", "aud": "client", "sub": "1", "iat": 1000, "exp": 2000], kid: kid)
    }

    /// `token(kid:)` with its signature's last byte changed: found key, `bad_signature`.
    static func forgedToken(kid: String) -> String {
        let parts = token(kid: kid).split(separator: ".").map(String.init)
        var signature = Base64URL.decode(parts[2]) ?? []
        if !signature.isEmpty { signature[signature.count - 1] ^= 1 }
        return parts[0] + "." + parts[1] + "." + Base64URL.encode(signature)
    }

    /// "ok", or the refusal's code.
    static func code(_ result: Result<VerifiedToken, IDTokenError>) -> String {
        switch result {
        case .success: "ok"
        case .failure(let error): error.code.name
        }
    }

    static func verify(_ cache: KeyCache, kid: String) -> String {
        code(cache.verify(token(kid: kid), with: verifier, now: now))
    }
}

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let time = Mutex(Duration.seconds(1000))
    var now: @Sendable () -> Duration { { [self] in time.withLock { $0 } } }
    func advance(_ seconds: Double) { time.withLock { $0 += .milliseconds(Int64(seconds * 1000)) } }
}

/// A loader the test scripts: answers with the latest script, counts calls (announcing each), and while held
/// blocks every call until released, as a hanging key endpoint does.
// SAFETY: every stored property is read and written only with `condition` locked.
final class ScriptedLoader: @unchecked Sendable {
    private let condition = NSCondition()
    private var answer: Result<KeyDocument, KeyFetchFailure> = .failure(.status(500))
    private var callCount = 0
    private var held = false

    private func locked<T>(_ body: () -> T) -> T {
        condition.lock()
        defer { condition.broadcast(); condition.unlock() }
        return body()
    }

    func answer(kids: [String], freshFor: Int64?) {
        locked { answer = .success(KeyDocument(body: Array(KeyCacheFixtures.jwks(kids).utf8), freshFor: freshFor)) }
    }
    func fail(_ failure: KeyFetchFailure = .status(500)) { locked { answer = .failure(failure) } }
    func answerRaw(_ body: String) { locked { answer = .success(KeyDocument(body: Array(body.utf8), freshFor: 100)) } }
    var calls: Int { locked { callCount } }
    /// From now on, calls block until `release()`.
    func hold() { locked { held = true } }
    func release() { locked { held = false } }

    /// Waits until at least `count` calls have started; false after `seconds` (the failure bound).
    func waitForCalls(_ count: Int, seconds: Double = 30) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while callCount < count { if !condition.wait(until: deadline) { return callCount >= count } }
        return true
    }

    var load: @Sendable () throws(KeyFetchFailure) -> KeyDocument {
        { [self] () throws(KeyFetchFailure) -> KeyDocument in
            let result: Result<KeyDocument, KeyFetchFailure> = locked {
                callCount += 1
                condition.broadcast()
                while held { condition.wait() }
                return answer
            }
            return try result.get()
        }
    }
}

/// Runs `body` on its own thread and returns its result, or nil when it has not returned within `seconds`: a
/// failure bound, so that a call that would wait on a hanging fetch fails the test instead of hanging it.
func returnsWithin<T: Sendable>(_ seconds: Double = 30, _ body: @escaping @Sendable () -> T) -> T? {
    let result = Mutex<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    Thread {
        let value = body()
        result.withLock { $0 = value }
        done.signal()
    }.start()
    guard done.wait(timeout: .now() + seconds) == .success else { return nil }
    return result.withLock { $0 }
}

/// Runs `body` on `count` threads at once and returns their results, in thread order. `ready` is called once every
/// thread is about to run `body` (a test releases a held loader there).
func onThreads<T: Sendable>(_ count: Int, whenAllStarted ready: () -> Void = {}, _ body: @escaping @Sendable (Int) -> T) -> [T?] {
    let results = Mutex<[T?]>(Array(repeating: nil, count: count))
    let started = DispatchSemaphore(value: 0), group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        Thread {
            started.signal()
            let value = body(index)
            results.withLock { $0[index] = value }
            group.leave()
        }.start()
    }
    for _ in 0..<count { started.wait() }
    ready()
    group.wait()
    return results.withLock { $0 }
}
