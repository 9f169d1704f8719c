// POST /risc through nginx -> FastCGI -> PostgreSQL: Google's security event tokens, signed here by the stack's
// key set, and what each does to the account (docs/risc.md).
import Foundation
import Signing
import Testing
import TestSupport

/// A SET signed by `key` (the stack's development key, which the responder trusts through its key set file).
struct SecurityEventToken {
    static let google = "https://accounts.google.com/"
    static let risc = "https://schemas.openid.net/secevent/risc/event-type/"

    var events: [String: Any]
    var jti = UUID().uuidString
    var issuer = google
    var audience: String
    var iat = Int(Date().timeIntervalSince1970)
    var extra: [String: Any] = [:]

    /// An event of `type` (a short name under risc/event-type/, or a full URI) about `sub`, the subject inside it.
    static func event(_ type: String, sub: String?, reason: String? = nil, state: String? = nil) -> [String: Any] {
        var body: [String: Any] = [:]
        if let sub { body["subject"] = ["subject_type": "iss-sub", "iss": google, "sub": sub] }
        if let reason { body["reason"] = reason }
        if let state { body["state"] = state }
        return [type.contains("://") ? type : risc + type: body]
    }

    func signed(by stack: Stack, kid: String? = nil, alg: String = "RS256") throws -> String {
        try signed(with: DevelopmentKey(pem: try String(contentsOfFile: stack.keyPath, encoding: .utf8)), kid: kid ?? stack.kid, alg: alg)
    }

    /// Signed with `key` under `kid`; `removing` claims leaves them out (a `jti`-less SET).
    func signed(with key: DevelopmentKey, kid: String, alg: String = "RS256", removing: [String] = []) throws -> String {
        var claims: [String: Any] = ["iss": issuer, "aud": audience, "iat": iat, "jti": jti, "events": events]
        for (name, value) in extra { claims[name] = value }
        for name in removing { claims[name] = nil }
        let payload = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        let header = #"{"alg":"\#(alg)","kid":"\#(kid)","typ":"secevent+jwt"}"#
        return key.sign(header: Array(header.utf8), payload: [UInt8](payload))
    }
}

@Suite(.serialized) final class RiscEndToEndTests {
    /// A client of the project that does not sign in here: its security events are accepted (item 12), its ID tokens not.
    static let androidClient = "1000000000003-e2eandroid.apps.googleusercontent.com"
    let stack: Stack
    init() throws {
        stack = try SharedStacks.stack("risc", environment: [
            "TOKENSIGNIN_RISC_AUDIENCES": "1000000000001-e2eclient.apps.googleusercontent.com,1000000000002-e2eother.apps.googleusercontent.com,\(Self.androidClient)",
        ])
    }

    func set(_ events: [String: Any], jti: String = UUID().uuidString, iat: Int? = nil) -> SecurityEventToken {
        var token = SecurityEventToken(events: events, jti: jti, audience: stack.clientID)
        if let iat { token.iat = iat }
        return token
    }

    func post(_ token: String, contentType: String = "application/secevent+jwt") throws -> Answer {
        try stack.request("POST", "/risc", headers: ["Content-Type": contentType], body: token)
    }

    /// Signs `sub` in; returns its session token.
    func signedIn(_ sub: String, iat: Int? = nil) throws -> String {
        let answer = try stack.signIn(try stack.token(sub: sub, iat: iat))
        #expect(answer.status == 200, "\(answer)")
        return try #require((answer.json["session"] as? [String: Any])?["token"] as? String)
    }

    func check(_ session: String) throws -> Int {
        try stack.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(session)"]).status
    }

    func events(_ sub: String) throws -> [[String]] {
        try stack.psql("SELECT event_type, outcome, coalesce(reason, ''), coalesce(state, ''), user_id IS NOT NULL FROM signin.security_events WHERE subject_sub = '\(sub)' ORDER BY id")
    }

    @Test(arguments: ["sessions-revoked", "https://schemas.openid.net/secevent/oauth/event-type/tokens-revoked"])
    func revocationEndsEverySessionAndOlderIDTokens(type: String) throws {
        let sub = "300000000000000000\(type.count)01"
        let phone = try signedIn(sub, iat: Int(Date().timeIntervalSince1970) - 120)
        let laptop = try signedIn(sub)
        let answer = try post(try set(SecurityEventToken.event(type, sub: sub)).signed(by: stack))
        #expect(answer.status == 202 && answer.body.isEmpty, "\(answer)")
        #expect(try check(phone) == 401 && check(laptop) == 401)
        #expect(try stack.count("signin.sessions s JOIN signin.users u ON u.id = s.user_id WHERE u.google_sub = '\(sub)' AND s.revoked_reason = 'security_event'") == 2)
        #expect(try events(sub).map { $0[1] } == ["sessions_revoked"])
        // An ID token issued before the event can no longer open a session; a new one can.
        let old = try stack.signIn(try stack.token(sub: sub, iat: Int(Date().timeIntervalSince1970) - 600))
        #expect(old.status == 401 && old.errorCode == "invalid_token", "\(old)")
        #expect(try stack.count("signin.sign_ins WHERE google_sub = '\(sub)' AND reason = 'id_token_revoked'") == 1)
        _ = try signedIn(sub, iat: Int(Date().timeIntervalSince1970) + 1)
    }

    /// Events about an account that has never signed in here are applied by its first sign-in: a token issued before
    /// a revocation opens nothing (and creates the user refused), a hijacking blocks until a newer enable.
    @Test func eventsAboutAnAccountNotYetKnownApplyAtItsFirstSignIn() throws {
        let now = Int(Date().timeIntervalSince1970)
        let revokedSub = "300000000000000000901", hijackedSub = "300000000000000000902"
        #expect(try post(try set(SecurityEventToken.event("sessions-revoked", sub: revokedSub), iat: now - 60).signed(by: stack)).status == 202)
        #expect(try post(try set(SecurityEventToken.event("account-disabled", sub: hijackedSub, reason: "hijacking"), iat: now - 60)
            .signed(by: stack)).status == 202)
        #expect(try events(revokedSub).map { $0[1] } == ["unknown_user"] && events(hijackedSub).map { $0[1] } == ["unknown_user"])

        let old = try stack.signIn(try stack.token(sub: revokedSub, iat: now - 120))
        #expect(old.status == 401 && old.errorCode == "invalid_token", "\(old)")
        #expect(try stack.count("signin.sign_ins WHERE google_sub = '\(revokedSub)' AND reason = 'id_token_revoked'") == 1)
        #expect(try stack.count("signin.sessions s JOIN signin.users u ON u.id = s.user_id WHERE u.google_sub = '\(revokedSub)'") == 0)
        _ = try signedIn(revokedSub, iat: now - 10)

        let blocked = try stack.signIn(try stack.token(sub: hijackedSub))
        #expect(blocked.status == 403 && blocked.errorCode == "access_denied", "\(blocked)")
        #expect(try stack.count("signin.flagged_users WHERE google_sub = '\(hijackedSub)' AND google_sign_in_blocked_at IS NOT NULL") == 1)
        #expect(try post(try set(SecurityEventToken.event("account-enabled", sub: hijackedSub), iat: now - 5).signed(by: stack)).status == 202)
        _ = try signedIn(hijackedSub)
    }

    @Test func hijackingBlocksSignInUntilANewerEnable() throws {
        let sub = "300000000000000000201"
        let session = try signedIn(sub)
        let now = Int(Date().timeIntervalSince1970)
        #expect(try post(try set(SecurityEventToken.event("account-disabled", sub: sub, reason: "hijacking"), iat: now - 30).signed(by: stack)).status == 202)
        #expect(try check(session) == 401)
        let blocked = try stack.signIn(try stack.token(sub: sub))
        #expect(blocked.status == 403 && blocked.errorCode == "access_denied", "\(blocked)")
        #expect(try stack.count("signin.sign_ins WHERE google_sub = '\(sub)' AND reason = 'google_sign_in_blocked'") == 1)
        #expect(try stack.count("signin.flagged_users WHERE google_sub = '\(sub)' AND google_sign_in_blocked_at IS NOT NULL") == 1)
        // Out of order: an enable issued before the block arrives late and lifts nothing; a newer one does.
        #expect(try post(try set(SecurityEventToken.event("account-enabled", sub: sub), iat: now - 60).signed(by: stack)).status == 202)
        #expect(try stack.signIn(try stack.token(sub: sub)).status == 403)
        #expect(try post(try set(SecurityEventToken.event("account-enabled", sub: sub), iat: now - 10).signed(by: stack)).status == 202)
        _ = try signedIn(sub)
        #expect(try events(sub).map { $0[1] } == ["sessions_revoked_and_blocked", "enable_stale", "unblocked"])
    }

    @Test func disabledWithoutReasonBlocksAndAnOlderDisableCannotUndoANewerEnable() throws {
        let sub = "300000000000000000301"
        let session = try signedIn(sub)
        let now = Int(Date().timeIntervalSince1970)
        #expect(try post(try set(SecurityEventToken.event("account-enabled", sub: sub), iat: now - 10).signed(by: stack)).status == 202)
        #expect(try post(try set(SecurityEventToken.event("account-disabled", sub: sub), iat: now - 20).signed(by: stack)).status == 202)
        #expect(try stack.signIn(try stack.token(sub: sub)).status == 200, "the late disable was issued before the enable")
        #expect(try post(try set(SecurityEventToken.event("account-disabled", sub: sub), iat: now).signed(by: stack)).status == 202)
        #expect(try stack.signIn(try stack.token(sub: sub)).status == 403)
        #expect(try check(session) == 200, "a block keeps existing sessions")
        #expect(try events(sub).map { $0[1] } == ["unblocked", "block_stale", "blocked"])
    }

    @Test(arguments: [("account-disabled", "bulk-account", "bulk-account"),
                      ("account-credential-change-required", nil, "credential-change-required")] as [(String, String?, String)])
    func flaggingEventsFlagForReviewOnly(type: String, reason: String?, flag: String) throws {
        let sub = "30000000000000000040\(flag.count % 10)"
        let session = try signedIn(sub)
        #expect(try post(try set(SecurityEventToken.event(type, sub: sub, reason: reason)).signed(by: stack)).status == 202)
        #expect(try check(session) == 200)
        #expect(try stack.psql("SELECT flagged_reason, google_sign_in_blocked_at IS NULL FROM signin.flagged_users WHERE google_sub = '\(sub)'") == [[flag, "t"]])
        _ = try signedIn(sub)
    }

    @Test func verificationUnknownTypesAndUnknownUsersAreRecordedWith202() throws {
        let sub = "300000000000000000501"
        _ = try signedIn(sub)
        #expect(try post(try set(SecurityEventToken.event("verification", sub: nil, state: "state-e2e")).signed(by: stack)).status == 202)
        #expect(try stack.psql("SELECT outcome FROM signin.security_events WHERE state = 'state-e2e'") == [["recorded"]])
        #expect(try post(try set(SecurityEventToken.event("https://schemas.example/new-event", sub: sub)).signed(by: stack)).status == 202)
        #expect(try post(try set(SecurityEventToken.event("sessions-revoked", sub: "399999999999999999999")).signed(by: stack)).status == 202)
        #expect(try stack.psql("SELECT outcome, user_id IS NULL FROM signin.security_events WHERE subject_sub = '399999999999999999999'") == [["unknown_user", "t"]])
        #expect(try events(sub).map { $0[1] } == ["recorded"])
    }

    @Test func aRedeliveredSETIsAcceptedAndAppliedOnce() throws {
        let sub = "300000000000000000601"
        _ = try signedIn(sub, iat: Int(Date().timeIntervalSince1970) - 600)
        let token = try set(SecurityEventToken.event("sessions-revoked", sub: sub), jti: "jti-redelivered", iat: Int(Date().timeIntervalSince1970) - 300)
            .signed(by: stack)
        #expect(try post(token).status == 202)
        let later = try signedIn(sub)
        #expect(try post(token).status == 202, "Google redelivers until it gets a 202")
        #expect(try check(later) == 200, "applied once: the redelivery ends no session opened since")
        #expect(try stack.count("signin.security_events WHERE jti = 'jti-redelivered'") == 1)
    }

    @Test func bothSubjectFormsNameTheUser() throws {
        let sub = "300000000000000000701"
        let first = try signedIn(sub)
        var topLevel = set(SecurityEventToken.event("sessions-revoked", sub: nil))
        topLevel.extra["sub_id"] = ["format": "iss_sub", "iss": SecurityEventToken.google, "sub": sub]
        #expect(try post(try topLevel.signed(by: stack)).status == 202)
        #expect(try check(first) == 401)
        let second = try signedIn(sub, iat: Int(Date().timeIntervalSince1970) + 2)
        let claims = set([SecurityEventToken.risc + "sessions-revoked": ["subject": ["subject_type": "id_token_claims",
                                                                                   "iss": SecurityEventToken.google, "sub": sub, "email": "x@example.com"]]],
                         iat: Int(Date().timeIntervalSince1970) + 3)
        #expect(try post(try claims.signed(by: stack)).status == 202)
        #expect(try check(second) == 401)
        #expect(try events(sub).count == 2)
    }

    /// (how the SET is wrong, RFC 8935 err) — each a 400 that changes nothing.
    @Test(arguments: ["invalid_request", "invalid_key", "authentication_failed", "invalid_issuer", "invalid_audience", "id_token",
                      "content_type", "no_media_type", "not_a_jws"])
    func aBadSETIs400WithItsCode(_ what: String) throws {
        let sub = "300000000000000000801"
        let session = try signedIn(sub)
        var token = set(SecurityEventToken.event("sessions-revoked", sub: sub))
        var contentType = "application/secevent+jwt"
        var expected = what
        let body: String
        switch what {
        case "invalid_request":
            // No issuer: whose SET it is cannot be told (one with unreadable events would be recorded unparsed, 202).
            body = try token.signed(with: DevelopmentKey(pem: String(contentsOfFile: stack.keyPath, encoding: .utf8)), kid: stack.kid,
                                    removing: ["iss"])
        case "invalid_key": body = try token.signed(by: stack, kid: "no-such-kid")
        case "authentication_failed":
            let signed = try token.signed(by: stack)
            body = String(signed.dropLast(4)) + (signed.hasSuffix("AAAA") ? "BBBB" : "AAAA")
        case "invalid_issuer":
            token.issuer = "https://evil.example/"
            body = try token.signed(by: stack)
        case "invalid_audience":
            token.audience = "1234-someoneelse.apps.googleusercontent.com"
            body = try token.signed(by: stack)
        case "id_token":
            body = try stack.token(sub: sub)
            expected = "invalid_request"
        case "content_type":
            body = try token.signed(by: stack)
            contentType = "application/json"
            expected = "invalid_request"
        case "no_media_type":
            // `;` once trapped the responder (every worker gone, nginx 502); the check below needs it alive.
            body = try token.signed(by: stack)
            contentType = ";"
            expected = "invalid_request"
        default:
            body = "not a token"
            expected = "invalid_request"
        }
        let answer = try post(body, contentType: contentType)
        #expect(answer.status == 400, "\(what): \(answer)")
        #expect(answer.header("Content-Type") == "application/json")
        #expect(answer.json["err"] as? String == expected, "\(what): \(answer)")
        #expect((answer.json["description"] as? String)?.isEmpty == false)
        #expect(try check(session) == 200)
        #expect(try events(sub).isEmpty)
    }

    // MARK: no genuine security event lost (items 7 to 10, 12, 14)

    /// Item 7: a SET carries no expiry that matters (RFC 8417; Google says not to check it): `exp` in the past is 202.
    @Test func aSETWithAnExpiryInThePastIsApplied() throws {
        let sub = "300000000000000001001"
        let session = try signedIn(sub, iat: Int(Date().timeIntervalSince1970) - 120)
        var token = set(SecurityEventToken.event("sessions-revoked", sub: sub), iat: Int(Date().timeIntervalSince1970) - 60)
        token.extra["exp"] = Int(Date().timeIntervalSince1970) - 3600
        let answer = try post(try token.signed(by: stack))
        #expect(answer.status == 202, "\(answer)")
        #expect(try check(session) == 401)
        #expect(try events(sub).map { $0[1] } == ["sessions_revoked"])
    }

    /// Item 8: `"reason": null` is no reason: an account-disabled event that blocks.
    @Test func anAccountDisabledWithANullReasonBlocks() throws {
        let sub = "300000000000000001101"
        let session = try signedIn(sub)
        let token = set([SecurityEventToken.risc + "account-disabled": [
            "subject": ["subject_type": "iss-sub", "iss": SecurityEventToken.google, "sub": sub], "reason": NSNull(),
        ] as [String: Any]], iat: Int(Date().timeIntervalSince1970) - 5)
        let answer = try post(try token.signed(by: stack))
        #expect(answer.status == 202, "\(answer)")
        #expect(try events(sub) == [[SecurityEventToken.risc + "account-disabled", "blocked", "", "", "t"]])
        #expect(try stack.signIn(try stack.token(sub: sub)).status == 403)
        #expect(try check(session) == 200, "a block without a reason keeps sessions")
    }

    /// Item 9: an `iat` ahead of our clock beyond the skew is applied as Google sent it (the order of events stays
    /// Google's), with a warning that says by how much.
    @Test func aSETIssuedAheadOfOurClockIsAppliedAsSentWithAWarning() throws {
        let sub = "300000000000000001201"
        _ = try signedIn(sub)
        let iat = Int(Date().timeIntervalSince1970) + 3600
        let token = set(SecurityEventToken.event("account-disabled", sub: sub), jti: "jti-ahead-\(UUID().uuidString)", iat: iat)
        let answer = try post(try token.signed(by: stack))
        #expect(answer.status == 202, "\(answer)")
        #expect(try stack.psql("SELECT outcome, extract(epoch FROM issued_at)::bigint FROM signin.security_events WHERE jti = '\(token.jti)'")
                == [["blocked", String(iat)]])
        // An enable issued between now and that iat arrives next: ordered by iat, it does not lift the block.
        #expect(try post(try set(SecurityEventToken.event("account-enabled", sub: sub)).signed(by: stack)).status == 202)
        #expect(try events(sub).map { $0[1] } == ["blocked", "enable_stale"])
        let warning = try #require(stack.serverLog.split(separator: "\n").first { $0.contains("jti=\(token.jti)") && $0.contains("level=warn") })
        #expect(warning.contains("level=warn event=security_event_issued_in_future jti=\(token.jti) iat=\(iat) now="), "\(warning)")
        let skew = warning.split(separator: " ").first { $0.hasPrefix("skew_seconds=") }.flatMap { Int($0.dropFirst("skew_seconds=".count)) }
        #expect(skew.map { (3500...3600).contains($0) } == true, "\(warning)")
    }

    /// Item 10: signed by Google for us but not readable (a reason that is a number, no jti): recorded as it came with
    /// outcome unparsed, applied to nobody, answered 202 (once per SET however often it comes) and counted.
    @Test func aSETThatCannotBeReadIsRecordedUnparsedAndChangesNothing() throws {
        let sub = "300000000000000001301"
        let session = try signedIn(sub)
        let token = set([SecurityEventToken.risc + "account-disabled": [
            "subject": ["subject_type": "iss-sub", "iss": SecurityEventToken.google, "sub": sub], "reason": 7,
        ] as [String: Any]], jti: "jti-unparsed-\(UUID().uuidString)")
        let signed = try token.signed(by: stack)
        for _ in 0..<2 { #expect(try post(signed).status == 202) }
        let rows = try stack.psql("""
            SELECT event_type, outcome, user_id IS NULL, subject_sub IS NULL, unparsed_reason, claims::jsonb #>> '{events}'
              FROM signin.security_events WHERE jti = '\(token.jti)'
            """)
        #expect(rows.count == 1, "\(rows)")
        #expect(rows.first.map { Array($0.prefix(5)) } == [SecurityEventToken.risc + "account-disabled", "unparsed", "t", "t",
                                                          "bad_events: event member reason is not a string"])
        #expect(rows.first?[5].contains(sub) == true, "the claims are kept: \(rows)")
        #expect(try check(session) == 200)
        #expect(try stack.signIn(try stack.token(sub: sub)).status == 200, "nothing about it reaches the user")
        let line = try #require(stack.serverLog.split(separator: "\n").last { $0.contains("jti=\(token.jti)") && $0.contains("route=risc") })
        #expect(line.contains("status=202") && line.contains("unparsed=bad_events"), "\(line)")
        #expect(stack.serverLog.contains("level=warn event=security_event_unparsed jti=\(token.jti) type=account-disabled reason=bad_events"))
        // Without a jti: recorded under the digest of its payload, once.
        let key = try DevelopmentKey(pem: String(contentsOfFile: stack.keyPath, encoding: .utf8))
        let anonymous = try set(SecurityEventToken.event("sessions-revoked", sub: sub), iat: Int(Date().timeIntervalSince1970) - 1)
            .signed(with: key, kid: stack.kid, removing: ["jti"])
        for _ in 0..<2 { #expect(try post(anonymous).status == 202) }
        #expect(try stack.count("signin.security_events WHERE outcome = 'unparsed' AND jti LIKE 'sha256:%' AND unparsed_reason = 'missing_claim: jti'") == 1)
        #expect(try check(session) == 200)
        let metrics = try stack.operatorsRequest("GET", "/metrics").body
        #expect(metrics.contains(#"tokensignin_security_events_total{type="\#(SecurityEventToken.risc)account-disabled",outcome="unparsed"} 1"#))
    }

    /// Item 12: a SET addressed to another client of the project (TOKENSIGNIN_RISC_AUDIENCES) is applied; that
    /// client's ID tokens still cannot sign in here.
    @Test func aSETForAnotherClientOfTheProjectIsApplied() throws {
        let sub = "300000000000000001401"
        let session = try signedIn(sub, iat: Int(Date().timeIntervalSince1970) - 120)
        var token = set(SecurityEventToken.event("sessions-revoked", sub: sub), iat: Int(Date().timeIntervalSince1970) - 60)
        token.audience = Self.androidClient
        let answer = try post(try token.signed(by: stack))
        #expect(answer.status == 202, "\(answer)")
        #expect(try check(session) == 401)
        #expect(try events(sub).map { $0[1] } == ["sessions_revoked"])
        let signIn = try stack.signIn(try stack.token(sub: sub, aud: Self.androidClient))
        #expect(signIn.status == 401 && signIn.errorCode == "invalid_token", "\(signIn)")
    }

    /// Item 14: `configure` subscribes to token-revoked; such an event (one OAuth refresh token, which tokensignin
    /// never stores) is recorded and changes nothing.
    @Test func aRevokedRefreshTokenIsRecordedOnly() throws {
        let sub = "300000000000000001501"
        let session = try signedIn(sub)
        let token = set(["https://schemas.openid.net/secevent/oauth/event-type/token-revoked": ["subject": [
            "subject_type": "oauth_token", "token_type": "refresh_token", "token_identifier_alg": "hash_base64_sha512_sha512",
            "token": "c29tZS1oYXNo",
        ]]], jti: "jti-token-revoked-\(UUID().uuidString)")
        #expect(try post(try token.signed(by: stack)).status == 202)
        #expect(try stack.psql("SELECT outcome, subject_sub IS NULL FROM signin.security_events WHERE jti = '\(token.jti)'") == [["recorded", "t"]])
        #expect(try check(session) == 200)
    }

    @Test func onlyPOSTAndABodyOverTheCapIsAnRFC8935Error() throws {
        let get = try stack.request("GET", "/risc")
        #expect(get.status == 405 && get.header("Allow") == "POST", "\(get)")
        let big = try post(String(repeating: "a", count: 70_000))
        #expect(big.status == 400 && big.json["err"] as? String == "invalid_request", "nginx's cap, in RFC 8935's shape: \(big)")
    }

    @Test func oneLogLinePerSETWithoutTheToken() throws {
        let sub = "300000000000000000901"
        _ = try signedIn(sub)
        let token = try set(SecurityEventToken.event("account-credential-change-required", sub: sub), jti: "jti-logged").signed(by: stack)
        #expect(try post(token).status == 202)
        let line = try #require(stack.serverLog.split(separator: "\n").last { $0.contains("jti=jti-logged") })
        #expect(line.contains("route=risc") && line.contains("status=202") && line.contains("events=account-credential-change-required:flagged"))
        #expect(!stack.serverLog.contains(String(token.split(separator: ".")[2])))
    }
}

/// Item 13 through nginx: Google's RISC configuration, served by a local stand-in, names another jwks_uri than the
/// receiver uses. The responder logs the mismatch as an error, shows it on /readyz (still 200: sign-ins stay in the
/// load balancer) and in /metrics, and verifies security events with the discovered key set from then on.
@Suite struct RiscConfigurationEndToEndTests {
    @Test func aDriftedRiscConfigurationIsReportedAndItsKeysVerifySecurityEvents() throws {
        let google = try RecordingServer()
        let discoveredKey = try DevelopmentKey.generate(.rsa2048)
        try google.answer("/discovered-certs", status: 200, body: discoveredKey.jwks)
        try google.answer("/.well-known/risc-configuration", status: 200,
                          body: #"{"issuer":"https://accounts.google.com/","jwks_uri":"\#(google.url("/discovered-certs"))"}"#)
        let stack = try Stack("riscdiscovery", environment: ["TOKENSIGNIN_RISC_CONFIGURATION_URL": google.url("/.well-known/risc-configuration")])
        // Not Google's document (allowed with TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS, as the stack sets): said at start.
        #expect(stack.serverLog.contains("level=warn event=non_google_risc_configuration_trusted location=\(google.url("/.well-known/risc-configuration"))"),
                "\(stack.serverLog)")

        // Read in the background at start: wait for its outcome on /readyz, never for a time.
        let deadline = Date().addingTimeInterval(20)
        var ready = try stack.operatorsRequest("GET", "/readyz")
        while (ready.json["warnings"] as? [String]) == nil && Date() < deadline {
            usleep(50_000)
            ready = try stack.operatorsRequest("GET", "/readyz")
        }
        #expect(ready.status == 200 && ready.json["status"] as? String == "ready", "\(ready)")
        #expect(ready.json["warnings"] as? [String] == ["risc_configuration_mismatch"], "\(ready)")
        let metrics = try stack.operatorsRequest("GET", "/metrics").body
        for line in ["tokensignin_risc_configuration_mismatch 1", "tokensignin_risc_configuration_separate_keys 1",
                     "tokensignin_risc_configuration_checks_total 1", "tokensignin_risc_configuration_check_failures_total 0"] {
            #expect(metrics.contains(line + "\n"), "\(line)")
        }
        let logged = try #require(stack.serverLog.split(separator: "\n").first { $0.contains("event=risc_configuration_mismatch") })
        #expect(logged.contains("level=error event=risc_configuration_mismatch issuer=https://accounts.google.com/ issuer_accepted=true"))
        #expect(logged.contains("jwks_uri=\(google.url("/discovered-certs")) expected_jwks_uri=https://www.googleapis.com/oauth2/v3/certs"))
        #expect(logged.contains("risc_keys=\(google.url("/discovered-certs"))"))

        // A SET signed with the discovered key set's key is verified and applied; one signed with the ID tokens' key
        // no longer is (that key is not in the discovered set); sign-ins keep the ID tokens' keys.
        let sub = "300000000000000002001"
        let signIn = try stack.signIn(try stack.token(sub: sub, iat: Int(Date().timeIntervalSince1970) - 60))
        #expect(signIn.status == 200, "\(signIn)")
        let session = try #require((signIn.json["session"] as? [String: Any])?["token"] as? String)
        var event = SecurityEventToken(events: SecurityEventToken.event("sessions-revoked", sub: sub), audience: stack.clientID)
        event.iat -= 30
        let byOldKey = try stack.request("POST", "/risc", headers: ["Content-Type": "application/secevent+jwt"], body: try event.signed(by: stack))
        #expect(byOldKey.status == 400 && byOldKey.json["err"] as? String == "invalid_key", "\(byOldKey)")
        let byDiscoveredKey = try stack.request("POST", "/risc", headers: ["Content-Type": "application/secevent+jwt"],
                                                body: try event.signed(with: discoveredKey, kid: discoveredKey.kid))
        #expect(byDiscoveredKey.status == 202, "\(byDiscoveredKey)")
        #expect(try stack.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(session)"]).status == 401)
        #expect(google.count("/discovered-certs") >= 1)
    }
}
