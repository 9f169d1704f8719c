// POST /tokensignin: the body, login CSRF, the ID token's verification, then the user and session the database opens.
import FastCGI
import IDToken
import Sessions

extension Application {
    /// A sign-in whose token is verified, with the session it is to open. A class, so a batch's `Prior`s stay
    /// small (a token's claims are many strings).
    final class AdmittedSignIn {
        let isWebForm: Bool
        /// Posted by a page of the site (it carried an Origin, which passed the check): the token goes in the
        /// HttpOnly cookie only, out of reach of the page's scripts.
        let fromBrowser: Bool
        let token: VerifiedToken
        let session: SessionToken
        let newSession: NewSession

        init(isWebForm: Bool, fromBrowser: Bool, token: VerifiedToken, session: SessionToken, newSession: NewSession) {
            self.isWebForm = isWebForm
            self.fromBrowser = fromBrowser
            self.token = token
            self.session = session
            self.newSession = newSession
        }
    }

    func signIn(_ request: Request, _ line: inout LogLine, prior: Prior?) throws -> Response {
        let admitted: AdmittedSignIn
        let outcome: SignInOutcome
        switch prior {
        case .signIn(let verified, let opened)?:
            admitted = verified
            outcome = try opened.get()
        case .refused(let error)?:
            throw error
        default:
            admitted = try admitSignIn(request)
            outcome = try store.signIn(admitted.token, admitted.newSession)
        }
        return try signedIn(admitted, outcome, &line)
    }

    /// Everything of a sign-in before the database: the body, login CSRF, the token's verification. `session`:
    /// the new session's token when the caller drew it already (a batch's, in one draw); else one is drawn once
    /// the token is verified.
    func admitSignIn(_ request: Request, session: SessionToken? = nil) throws -> AdmittedSignIn {
        guard !request.bodyTooLarge else { throw SignInError(.bodyTooLarge) }
        let parsed = try SignInRequest.parse(contentType: request.contentType, body: request.body,
                                             cookieHeader: request.header("Cookie"))
        // Login CSRF: another site's page must not sign this browser into an attacker's account. The web
        // form is posted by Google's page (Origin https://accounts.google.com) and carries its CSRF pair.
        if case .refused(let reason) = originCheck.decideTokenPost(origin: request.header("Origin"), secFetchSite: request.header("Sec-Fetch-Site"),
                                                                 webForm: parsed.isWebForm) {
            throw SignInError(.crossSite, reason)
        }

        let token: VerifiedToken
        let verifyStarted = ContinuousClock.now
        let verification = tokens.verify(parsed.idToken, with: verifier, now: clock())
        metrics.verification(seconds: Metrics.seconds(since: verifyStarted))
        switch verification {
        case .success(let verified):
            token = verified
        case .failure(let error):
            if !error.isRetryable {
                if service.refusalAudit.admit(network: request.remoteNetwork, reason: error.code.name, now: clock()) {
                    // Best effort: the audit row must not turn a 401 into a 503.
                    try? store.recordRefusedSignIn(reason: error.code.name, clientID: nil, ip: request.remoteIP,
                                                   userAgent: Self.userAgent(request))
                } else {
                    metrics.auditSuppressed(reason: error.code.name)
                }
            }
            throw error
        }
        let session = session ?? SessionToken.generate()
        return AdmittedSignIn(isWebForm: parsed.isWebForm, fromBrowser: request.header("Origin") != nil, token: token,
                              session: session, newSession: NewSession(tokenHash: session.hash, clientID: token.audience,
                                                     userAgent: Self.userAgent(request), ip: request.remoteIP))
    }

    /// The answer to a sign-in the database has decided.
    func signedIn(_ admitted: AdmittedSignIn, _ outcome: SignInOutcome, _ line: inout LogLine) throws -> Response {
        let token = admitted.token
        let session = admitted.session
        switch outcome {
        case .refused(let userID, .idTokenRevoked):
            line["user_id"] = String(userID)
            throw SignInError(.idTokenRevoked, "issued before the account's sessions were revoked")
        case .refused(let userID, let refusal):
            line["user_id"] = String(userID)
            throw SignInError(.accountRefused, refusal.rawValue)
        case .signedIn(let signedIn):
            line["user_id"] = String(signedIn.userID)
            line["session_id"] = String(signedIn.sessionID)
            line["created"] = String(signedIn.created)
            line["client_id"] = token.audience
            let cookie = ("Set-Cookie", Cookies.sessionCookie(name: site.cookieName, token: session.value,
                                                              maxAge: site.sessionTTL))
            if admitted.isWebForm {
                return .seeOther(site.signInRedirect, headers: [cookie])
            }
            var body = JSONObjectWriter(capacity: 512)
            body.object("user") { user in
                user.int("id", signedIn.userID)
                user.string("sub", token.subject)
                user.string("email", token.email)
                user.bool("email_verified", token.emailVerified)
                user.string("name", token.name)
                user.string("picture", token.picture)
                user.bool("created", signedIn.created)
            }
            body.object("session") { session in
                if !admitted.fromBrowser { session.string("token", admitted.session.value) }
                session.string("expires_at", signedIn.expiresAt.rfc3339)
            }
            return .json(encoded: body.finished(), headers: [cookie])
        }
    }
}
