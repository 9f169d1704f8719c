// Shared pieces for the key-cache tests: JWKS documents with chosen kids, tokens naming a kid, a manual clock.
import Foundation
import Synchronization
@testable import GoogleKeys
import IDToken
import Signing

enum KeyCacheFixtures {
    /// A real RSA-2048 modulus, so the real KeySet accepts the documents too ("" if key generation failed,
    /// which fails every test that loads a document).
    static let modulus: String = {
        guard let jwk = (try? DevelopmentKey.generate(.rsa2048))?.publicJWK, let r = jwk.range(of: "\"n\":\"") else { return "" }
        return String(jwk[r.upperBound...].prefix { $0 != "\"" })
    }()

    static func jwks(_ kids: [String]) -> String {
        let keys = kids.map { #"{"kty":"RSA","alg":"RS256","use":"sig","e":"AQAB","kid":"\#($0)","n":"\#(modulus)"}"# }
        return #"{"keys":[\#(keys.joined(separator: ","))]}"#
    }

    /// A well-formed RS256 token whose header names `kid`; its signature is junk (the cache never checks it).
    static func token(kid: String) -> String {
        func b64(_ text: String) -> String { b64(Array(text.utf8)) }
        func b64(_ bytes: [UInt8]) -> String {
            Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let header = #"{"alg":"RS256","kid":"\#(kid)","typ":"JWT"}"#
        let claims = #"{"iss":"https://accounts.google.com","aud":"client","sub":"1","iat":1000,"exp":2000}"#
        return b64(header) + "." + b64(claims) + "." + b64([UInt8](repeating: 7, count: 256))
    }

    static let verifier = Verifier(policy: Policy(clientIDs: ["client"]))

    /// True when `result` is anything but an unknown-kid refusal (the kid was found, whatever the signature says).
    static func kidWasFound(_ result: Result<VerifiedToken, IDTokenError>) -> Bool {
        if case .failure(let error) = result { return error.code != .unknownKid }
        return true
    }
}

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let time = Mutex(Duration.seconds(1000))
    var now: @Sendable () -> Duration { { [self] in time.withLock { $0 } } }
    func advance(_ seconds: Double) { time.withLock { $0 += .milliseconds(Int64(seconds * 1000)) } }
}

/// A loader the test scripts: answers in turn, counts calls, can hold a call until released.
final class ScriptedLoader: Sendable {
    private struct State { var answers: [Result<KeyDocument, KeyFetchFailure>] = []; var calls = 0; var gate = false }
    private let state = Mutex(State())

    func answer(kids: [String], freshFor: Int64?) {
        state.withLock { $0.answers = [.success(KeyDocument(body: Array(KeyCacheFixtures.jwks(kids).utf8), freshFor: freshFor))] }
    }
    func fail(_ failure: KeyFetchFailure = .status(500)) { state.withLock { $0.answers = [.failure(failure)] } }
    func answerRaw(_ body: String) { state.withLock { $0.answers = [.success(KeyDocument(body: Array(body.utf8), freshFor: 100))] } }
    var calls: Int { state.withLock { $0.calls } }
    /// While closed, loads block (to observe serving during a refresh).
    func close() { state.withLock { $0.gate = true } }
    func open() { state.withLock { $0.gate = false } }

    var load: @Sendable () throws(KeyFetchFailure) -> KeyDocument {
        { [self] () throws(KeyFetchFailure) -> KeyDocument in
            state.withLock { $0.calls += 1 }
            while state.withLock({ $0.gate }) { usleep(1000) }
            let answer = state.withLock { $0.answers.last! }
            return try answer.get()
        }
    }
}

/// Waits up to `seconds` for `condition`.
func eventually(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(2000)
    }
    return condition()
}

/// Runs `body` on `count` threads at once and waits for all of them.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        let thread = Thread { body(index); group.leave() }
        thread.start()
    }
    group.wait()
}
