// The operators' side of the PostgreSQL store: what `tokensignin sessions` and `tokensignin prune` read and
// change, and the values they answer with.
import Store

/// One row of `tokensignin sessions list`: any session of a user, live or not, with its state.
package struct UserSession: Sendable, Equatable {
    package var id: Int64
    package var createdAt: Timestamp
    package var lastSeenAt: Timestamp
    package var expiresAt: Timestamp
    /// `active`, `idle`, `expired` or `revoked:<reason>`.
    package var state: String
    package var ip: String?
    package var clientID: String?
    package var userAgent: String?
}

/// How `tokensignin prune` deletes: retention periods and the batch size. Idle sessions go by the idle timeout the
/// responder recorded (`signin.service_settings`), not by a setting of the command.
package struct PrunePolicy: Sendable, Equatable {
    package var revokedRetention: Int64 = 30 * 86_400
    package var auditRetention: Int64 = 90 * 86_400
    package var batch = 1_000

    /// Ids per statement of the idle walk: each reads at most this many sessions.
    package var idleChunk: Int { batch * 10 }

    /// The shortest audit retention `signin.prune_sign_ins` accepts: the service's role can never erase the last week.
    package static let minimumAuditRetention: Int64 = 7 * 86_400
}

extension PrunePolicy {
    /// The defaults; the command sets what its options give.
    package static let standard = PrunePolicy()
}

/// The session settings the responder recorded in `signin.service_settings`.
package struct RecordedSettings: Sendable, Equatable {
    package var idleTimeout: Int64
    package var lifetime: Int64
    package var updatedAt: Timestamp
    /// The version line of the responder that wrote them.
    package var updatedBy: String
}

/// What one `tokensignin prune` deleted, and the idle timeout it went by (nil: none recorded, so no session was
/// deleted for idleness).
package struct PruneOutcome: Sendable, Equatable {
    package var sessions: Int
    package var signIns: Int
    package var settings: RecordedSettings?
}

/// What `tokensignin sessions revoke --all` did: how many sessions it revoked, all created before `cutoff` (RFC
/// 3339 with microseconds, never later than when the command started).
package struct RevokedEveryone: Sendable, Equatable {
    package var revoked: Int
    package var cutoff: String
}

// MARK: operator commands (`tokensignin sessions`, `tokensignin prune`)

extension PostgresStore {
    package func userExists(sub: String) throws(StoreError) -> Bool {
        try rows(OperatorQueries.userExists, [sub]).decode(row: 0, as: Int64.self) > 0
    }

    package func sessionExists(id: Int64) throws(StoreError) -> Bool {
        try rows(OperatorQueries.sessionExists, [id]).decode(row: 0, as: Int64.self) > 0
    }

    /// Every session of the user, newest first; `idle` by the responder's recorded idle timeout (this store's own
    /// only when none is recorded).
    package func sessions(ofUser sub: String) throws(StoreError) -> [UserSession] {
        let result = try rows(OperatorQueries.listUserSessions, [sub, SQLInterval(seconds: policy.idleTimeout)])
        var sessions: [UserSession] = []
        for row in 0..<result.count {
            let (id, created, lastSeen, expires, state, ip, clientID, userAgent) = try result.decode(
                row: row, as: Int64.self, Timestamp.self, Timestamp.self, Timestamp.self, String.self, String?.self,
                String?.self, String?.self)
            sessions.append(UserSession(id: id, createdAt: created, lastSeenAt: lastSeen, expiresAt: expires, state: state,
                                        ip: ip, clientID: clientID, userAgent: userAgent))
        }
        return sessions
    }

    /// Revokes every live session of the user (reason `operator`); returns how many.
    package func revokeSessions(ofUser sub: String) throws(StoreError) -> Int {
        try rows(OperatorQueries.revokeUserSessions, [sub]).count
    }

    /// Revokes one session (reason `operator`); false when it was already revoked.
    package func revokeSession(id: Int64) throws(StoreError) -> Bool {
        try rows(OperatorQueries.revokeSession, [id]).count == 1
    }

    /// Revokes every session neither revoked nor expired that was created before `createdBefore` (RFC 3339, already
    /// validated; nil: now), reason `operator_all`, `batch` at a time, each batch its own short statement.
    package func revokeAllSessions(createdBefore: String?, batch: Int = 1_000) throws(StoreError) -> RevokedEveryone {
        let (cutoff, shown) = try rows(OperatorQueries.revokeAllCutoff, [createdBefore]).decode(row: 0, as: String.self, String.self)
        var revoked = 0
        var after: Int64 = 0
        while true {
            let (held, last, done) = try rows(OperatorQueries.revokeAllSessions, [cutoff, after, batch])
                .decode(row: 0, as: Int.self, Int64?.self, Int.self)
            revoked += done
            guard held == batch, let last else { break }
            after = last
        }
        return RevokedEveryone(revoked: revoked, cutoff: shown)
    }

    /// The settings the responder recorded; nil when none has yet.
    package func recordedSettings() throws(StoreError) -> RecordedSettings? {
        let result = try rows(ServiceSettingsQueries.read, [])
        guard result.count == 1 else { return nil }
        let (idle, lifetime, at, by) = try result.decode(row: 0, as: Int64.self, Int64.self, Timestamp.self, String.self)
        return RecordedSettings(idleTimeout: idle, lifetime: lifetime, updatedAt: at, updatedBy: by)
    }

    /// Deletes what has outlived its use, batch by batch: expired sessions, sessions idle beyond the recorded idle
    /// timeout (a walk over the ids, `idleChunk` at a time; skipped when none is recorded), sessions revoked longer
    /// ago than the retention, then old audit rows.
    package func prune(_ prune: PrunePolicy) throws(StoreError) -> PruneOutcome {
        let settings = try recordedSettings()
        var sessions = 0
        let batches: [(Statement, [any SQLParameter])] = [
            (OperatorQueries.pruneExpiredSessions, [prune.batch]),
            (OperatorQueries.pruneRevokedSessions, [SQLInterval(seconds: prune.revokedRetention), prune.batch]),
        ]
        for (statement, params) in batches {
            while true {
                let deleted = try rows(statement, params).affectedRows
                sessions += deleted
                if deleted < prune.batch { break }
            }
        }
        if settings != nil {
            let (below, last) = try rows(OperatorQueries.sessionIDRange, []).decode(row: 0, as: Int64?.self, Int64?.self)
            var after = below ?? 0
            let chunk = prune.idleChunk
            while let last, after < last {
                sessions += try rows(OperatorQueries.pruneIdleSessions, [after, chunk]).affectedRows
                after += Int64(chunk)
            }
        }
        var signIns = 0
        while true {
            let deleted = try rows(OperatorQueries.pruneSignIns, [SQLInterval(seconds: prune.auditRetention), prune.batch])
                .decode(row: 0, as: Int.self)
            signIns += deleted
            if deleted < prune.batch { break }
        }
        return PruneOutcome(sessions: sessions, signIns: signIns, settings: settings)
    }
}
