// Cross-Account Protection: what each security event Google sends does to the account it names, and the store
// that records and applies it.
import IDToken

/// What an event does (docs/risc.md). The store applies it to the user matched on `google_sub`.
enum SecurityAction: String, Sendable, CaseIterable {
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
    static func of(type: String, reason: String?) -> SecurityAction {
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
        default: return .record
        }
    }

    /// `users.flagged_reason` for a flag.
    static func flagReason(type: String, reason: String?) -> String? {
        switch (type, reason) {
        case (SecurityEvent.accountDisabled, "bulk-account"): "bulk-account"
        case (SecurityEvent.accountCredentialChangeRequired, _): "credential-change-required"
        default: nil
        }
    }
}

/// One event of a verified SET, as the store records it.
struct SecurityEventRecord: Sendable, Equatable {
    var jti: String
    var issuer: String
    var type: String
    /// The Google account's sub, when the event names one issued by Google; nil otherwise.
    var subject: String?
    var reason: String?
    var state: String?
    /// The SET's iat (Unix seconds): when Google issued the event.
    var issuedAt: Int64

    var action: SecurityAction { .of(type: type, reason: reason) }
}

/// What recording an event did (`security_events.outcome`), or that it had been recorded before.
struct AppliedSecurityEvent: Sendable, Equatable {
    var type: String
    var userID: Int64?
    /// `sessions_revoked`, `blocked`, ... (the column's values); `duplicate` for a redelivered event.
    var outcome: String
    var sessionsRevoked: Int

    static let duplicate = "duplicate"
}

/// Records security events and applies them, each (jti, type) once.
protocol SecurityEventStore: AnyObject {
    /// Records and applies every event of one SET in one transaction; an event already recorded (Google
    /// redelivers until it gets 202) changes nothing and comes back with the outcome `duplicate`.
    func applySecurityEvents(_ events: [SecurityEventRecord]) throws -> [AppliedSecurityEvent]
}
