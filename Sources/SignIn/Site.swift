// What the HTTP application is told about the site it serves: the settings its routes read, already validated.
import IDToken

/// The routes' settings (the command line's settings table builds it from `TOKENSIGNIN_*`; tests build it directly).
package struct Site: Sendable {
    /// Whose ID tokens are accepted: client IDs, hosted domains, clock skew.
    package var policy: Policy
    /// Name of the session cookie (an RFC 9110 token).
    package var cookieName: String
    /// The session cookie's `Max-Age`: the sessions' absolute lifetime, in seconds.
    package var sessionTTL: Int64
    /// Where the web form flow answers `303 See Other`.
    package var signInRedirect: String
    /// Origins of the site's own pages, and the pages that may post the web form cross-site.
    package var originCheck: OriginCheck
    /// Whose security event tokens `POST /risc` accepts (`aud`): the client IDs, and other clients of the project.
    package var riscAudiences: [String]

    package init(policy: Policy, cookieName: String, sessionTTL: Int64, signInRedirect: String, originCheck: OriginCheck,
                 riscAudiences: [String]? = nil) {
        self.riscAudiences = riscAudiences ?? policy.clientIDs
        self.policy = policy
        self.cookieName = cookieName
        self.sessionTTL = sessionTTL
        self.signInRedirect = signInRedirect
        self.originCheck = originCheck
    }

    /// What security event tokens are verified against: the RISC audiences as client IDs, the same clock skew.
    package var securityEventPolicy: Policy { Policy(clientIDs: riscAudiences, clockSkew: policy.clockSkew) }
}
