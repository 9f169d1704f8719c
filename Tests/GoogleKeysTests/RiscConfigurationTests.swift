// Google's RISC configuration against a local stand-in: a match keeps the ID tokens' keys for /risc, a drifted
// jwks_uri gets a key cache of its own, a drifted issuer is reported, and a document that cannot be read changes nothing.
import Foundation
@testable import GoogleKeys
import IDToken
import Signing
import TestSupport
import Testing

@Suite struct RiscConfigurationTests {
    static let google = "https://accounts.google.com/"
    static let path = "/.well-known/risc-configuration"
    let server: RecordingServer
    /// The key the discovered key set holds; the ID tokens' key set (`/certs`) holds `KeyCacheFixtures.key` only.
    let discoveredKey: DevelopmentKey
    let tokenKeys: KeyCache
    let verifier = SecurityEventVerifier(policy: Policy(clientIDs: ["client"]))

    init() throws {
        server = try RecordingServer()
        discoveredKey = try DevelopmentKey.generate(.rsa2048)
        try server.answer("/certs", status: 200, body: KeyCacheFixtures.jwks(["id-token-key"]))
        try server.answer("/discovered", status: 200, body: discoveredKey.jwks)
        tokenKeys = KeyCache(source: .url(server.url("/certs")))
    }

    func monitor(expecting jwks: String? = nil) -> RiscConfigurationMonitor {
        RiscConfigurationMonitor(url: server.url(Self.path), expectedJWKS: jwks ?? server.url("/certs"), tokenKeys: tokenKeys)
    }

    func configure(issuer: String = google, jwks: String) throws {
        try server.answer(Self.path, status: 200, body: #"{"issuer":"\#(issuer)","jwks_uri":"\#(jwks)","delivery_methods_supported":[]}"#)
    }

    /// A security event token signed by `key` with `kid`.
    func event(_ key: DevelopmentKey, kid: String) -> String {
        let payload = #"{"iss":"https://accounts.google.com/","aud":"client","iat":1400,"jti":"j1","events":{"\#(SecurityEvent.verification)":{"state":"s"}}}"#
        return key.sign(headerJSON: #"{"alg":"RS256","kid":"\#(kid)","typ":"secevent+jwt"}"#, payloadJSON: payload)
    }

    @Test(arguments: [google, "https://accounts.google.com"])
    func aMatchingConfigurationKeepsTheIDTokensKeys(issuer: String) throws {
        try configure(issuer: issuer, jwks: server.url("/certs"))
        let risc = monitor()
        #expect(risc.check() == .matches)
        let status = risc.status
        #expect(!status.mismatch && status.securityEventKeysURL == nil && status.checks == 1 && status.failures == 0)
        #expect(status.discovered == RiscConfiguration(issuer: issuer, jwksURI: server.url("/certs")))
        #expect(risc.keys === tokenKeys)
        #expect(try risc.verify(event(KeyCacheFixtures.key, kid: "id-token-key"), with: verifier, now: 1500).get().verified != nil)
    }

    /// Item 13: a jwks_uri other than the one the receiver uses is a mismatch, and security events are then verified
    /// with the discovered key set (one cache, kept while the document says the same); ID tokens keep theirs.
    @Test func aDifferentJwksURIGetsAKeyCacheOfItsOwnForSecurityEvents() throws {
        try configure(jwks: server.url("/discovered"))
        let risc = monitor()
        #expect(risc.check() == .mismatch)
        let status = risc.status
        #expect(status.jwksMismatch && !status.issuerMismatch && status.mismatch)
        #expect(status.securityEventKeysURL == server.url("/discovered"))
        let keys = risc.keys
        #expect(keys !== tokenKeys)
        let signed = event(discoveredKey, kid: discoveredKey.kid)
        #expect(try risc.verify(signed, with: verifier, now: 1500).get().verified?.keyID == discoveredKey.kid)
        #expect(tokenKeys.verify(signed, with: verifier, now: 1500) == .failure(IDTokenError(.unknownKid)))
        #expect(risc.check() == .mismatch)
        #expect(risc.keys === keys, "the same discovered URI keeps its cache (and its keys)")
        // Google's document back in line: the ID tokens' keys again.
        try configure(jwks: server.url("/certs"))
        #expect(risc.check() == .matches)
        #expect(risc.keys === tokenKeys && !risc.status.mismatch)
    }

    @Test func anotherIssuerIsAMismatchThatKeepsTheKeys() throws {
        try configure(issuer: "https://accounts.example/", jwks: server.url("/certs"))
        let risc = monitor()
        #expect(risc.check() == .mismatch)
        #expect(risc.status.issuerMismatch && !risc.status.jwksMismatch && risc.keys === tokenKeys)
    }

    /// A discovered key set URL that may not be fetched (plain http to another host) is reported, never used.
    @Test func anUnfetchableJwksURIIsAMismatchThatKeepsTheKeys() throws {
        try configure(jwks: "http://keys.example/certs")
        let risc = monitor()
        #expect(risc.check() == .mismatch)
        #expect(risc.status.jwksMismatch && risc.status.securityEventKeysURL == nil && risc.keys === tokenKeys)
    }

    /// (status, body) — a read that fails is counted with its reason and changes nothing: the last outcome stands.
    @Test(arguments: [
        (500, #"{"issuer":"https://accounts.google.com/"}"#, "HTTP status 500"),
        (200, "not json", "invalid document"),
        (200, #"{"issuer":"https://accounts.google.com/"}"#, "invalid document: no usable jwks_uri"),
        (200, #"{"jwks_uri":"https://keys.example/certs"}"#, "invalid document: no usable issuer"),
        (200, #"{"issuer":"https://accounts.google.com/","jwks_uri":"https://keys.example/a b"}"#, "invalid document: no usable jwks_uri"),
        (200, #"{"issuer":"https://accounts.google.com/","jwks_uri":""# + String(repeating: "x", count: 70_000) + #""}"#, "body over 65536 bytes"),
    ] as [(Int, String, String)])
    func anUnreadableConfigurationIsCountedAndChangesNothing(status: Int, body: String, reason: String) throws {
        try configure(jwks: server.url("/discovered"))
        let risc = monitor()
        #expect(risc.check() == .mismatch)
        let keys = risc.keys
        try server.answer(Self.path, status: status, body: body)
        guard case .failed(let failure) = risc.check() else {
            Issue.record("read as a document")
            return
        }
        #expect(failure.description.contains(reason), "\(failure)")
        let after = risc.status
        #expect(after.checks == 2 && after.failures == 1 && after.lastError?.contains(reason) == true)
        #expect(after.mismatch && risc.keys === keys)
    }

    @Test func anUnreachableConfigurationIsAFailure() {
        let risc = RiscConfigurationMonitor(url: "http://127.0.0.1:9/.well-known/risc-configuration", expectedJWKS: "x", tokenKeys: tokenKeys)
        guard case .failed(.transport) = risc.check() else {
            Issue.record("not a transport failure")
            return
        }
        #expect(risc.status.failures == 1 && risc.keys === tokenKeys)
    }

    /// `start` reads at once on a thread of its own, reports it, and reads again after the interval until `stop`.
    @Test func startReadsInTheBackgroundAndReportsEachRead() throws {
        try configure(jwks: server.url("/discovered"))
        let reports = Reports()
        let risc = RiscConfigurationMonitor(url: server.url(Self.path), expectedJWKS: server.url("/certs"), tokenKeys: tokenKeys,
                                            interval: .milliseconds(50), report: { outcome, status in reports.add(outcome, status) })
        risc.start()
        defer { risc.stop() }
        #expect(reports.wait(for: 2), "two reads within the deadline")
        let first = try #require(reports.all.first)
        #expect(first.0 == .mismatch && first.1.securityEventKeysURL == server.url("/discovered"))
        #expect(server.count(Self.path) >= 2)
    }
}

/// What a monitor reported, for a test to wait on (a deadline-bounded poll, never a sleep that orders events).
private final class Reports: @unchecked Sendable {
    // SAFETY: every access holds `lock`.
    private let lock = NSLock()
    private var items: [(RiscConfigurationMonitor.Outcome, RiscConfigurationMonitor.Status)] = []

    func add(_ outcome: RiscConfigurationMonitor.Outcome, _ status: RiscConfigurationMonitor.Status) {
        lock.withLock { items.append((outcome, status)) }
    }

    var all: [(RiscConfigurationMonitor.Outcome, RiscConfigurationMonitor.Status)] { lock.withLock { items } }

    /// Waits (at most 10 s) until `count` reports have arrived.
    func wait(for count: Int) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while all.count < count && Date() < deadline { usleep(5_000) }
        return all.count >= count
    }
}
