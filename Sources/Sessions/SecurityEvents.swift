// Cross-Account Protection: what each security event Google sends does to the account it names, and the store
// that records and applies it.
import IDToken

/// What an event does (docs/risc.md). The store applies it to the user matched on `google_sub`.
package enum SecurityAction: String, Sendable, CaseIterable {
    /// End every live session; ID tokens issued before the event can no longer open one.
    case revokeSessions = "revoke"
    /// The same, and block Google sign-in (an account hijacked).
    case revokeSessionsAndBlock = "revoke_block"
    /// Block Google sign-in, unless an account-enabled event issued later has been seen.
    case block
    /// Lift the block, unless it was set by an event issued later than this one.
    case unblock
    /// Ask a person to review the account; nothing else changes.
    case flag
    /// Only record it (verification, an event type we do not act on).
    case record

    /// The action for an event of `type` with `reason`. An account-disabled event with a reason other than
    /// `hijacking` or `bulk-account` blocks, as one without a reason does: the safe side for a reason Google
    /// adds later.
    package static func of(type: String, reason: String?) -> SecurityAction {
        switch type {
        case SecurityEvent.sessionsRevoked, SecurityEvent.tokensRevoked: return .revokeSessions
        case SecurityEvent.accountDisabled:
            switch reason {
            case "hijacking": return .revokeSessionsAndBlock
            case "bulk-account": return .flag
            default: return .block
            }
        case SecurityEvent.accountEnabled: return .unblock
        case SecurityEvent.accountCredentialChangeRequired: return .flag
        // One OAuth refresh token revoked: we store none (sign-in keeps no Google tokens), so there is nothing to end.
        case SecurityEvent.tokenRevoked: return .record
        default: return .record
        }
    }

    /// `users.flagged_reason` for a flag.
    package static func flagReason(type: String, reason: String?) -> String? {
        switch (type, reason) {
        case (SecurityEvent.accountDisabled, "bulk-account"): "bulk-account"
        case (SecurityEvent.accountCredentialChangeRequired, _): "credential-change-required"
        default: nil
        }
    }
}

/// One event of a verified SET, as the store records it.
package struct SecurityEventRecord: Sendable, Equatable {
    package let jti: String
    package let issuer: String
    package let type: String
    /// The Google account's sub, when the event names one issued by Google; nil otherwise.
    package let subject: String?
    package let reason: String?
    package let state: String?
    /// The SET's iat (Unix seconds): when Google issued the event.
    package let issuedAt: Int64
    /// What it does to the account, by name (`SecurityAction`'s raw value), as `apply_security_event` binds it.
    let actionName: String
    /// `users.flagged_reason` for a flag.
    let flagReason: String?

    package init(jti: String, issuer: String, type: String, subject: String?, reason: String?, state: String?, issuedAt: Int64) {
        self.jti = jti
        self.issuer = issuer
        self.type = type
        self.subject = subject
        self.reason = reason
        self.state = state
        self.issuedAt = issuedAt
        actionName = SecurityAction.of(type: type, reason: reason).rawValue
        flagReason = SecurityAction.flagReason(type: type, reason: reason)
    }

    package var action: SecurityAction { .of(type: type, reason: reason) }
}

/// A SET signed by Google and addressed to us whose claims the receiver could not read (`UnparsedSecurityEvent`),
/// as the store records it: outcome `unparsed`, its payload kept, nothing applied to any user.
package struct UnparsedSecurityEventRecord: Sendable, Equatable {
    package let jti: String
    package let issuer: String
    package let type: String
    /// The SET's iat when it is a number (Unix seconds).
    package let issuedAt: Int64?
    /// The payload as received (JSON text), a raw NUL (which a text column cannot hold) written as its JSON escape.
    package let claims: String
    /// Why it was not read: the refusal code and its detail, at most 256 characters.
    package let reason: String

    package init(jti: String, issuer: String, type: String, issuedAt: Int64?, claims: String, reason: String) {
        self.jti = jti
        self.issuer = issuer
        self.type = type
        self.issuedAt = issuedAt
        self.claims = claims.contains("\u{0}") ? claims.replacing("\u{0}", with: "\\u0000") : claims
        self.reason = String(reason.unicodeScalars.prefix(256))
    }

    /// The outcome of an unparsed event (`security_events.outcome`).
    package static let outcome = "unparsed"
}

/// What recording an event did (`security_events.outcome`), or that it had been recorded before.
package struct AppliedSecurityEvent: Sendable, Equatable {
    package var type: String
    package var userID: Int64?
    /// `sessions_revoked`, `blocked`, ... (the column's values); `duplicate` for a redelivered event.
    package var outcome: String
    package var sessionsRevoked: Int

    package static let duplicate = "duplicate"
}

/// Records security events and applies them, each (jti, type) once.
package protocol SecurityEventStore: AnyObject {
    /// Records and applies every event of one SET in one transaction; an event already recorded (Google
    /// redelivers until it gets 202) changes nothing and comes back with the outcome `duplicate`.
    func applySecurityEvents(_ events: [SecurityEventRecord]) throws -> [AppliedSecurityEvent]
    /// Records an unparsed SET (outcome `unparsed`, its claims kept) and applies nothing; one recorded before (the
    /// same jti and event type) comes back as `duplicate`.
    func recordUnparsedSecurityEvent(_ event: UnparsedSecurityEventRecord) throws -> AppliedSecurityEvent
}
