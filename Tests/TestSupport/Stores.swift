// The PostgreSQL store as the database tests of several modules open it: one policy, one new session, one sign-in.
import Logging
import Sessions
import Store

package enum TestStores {
    /// The service's default lifetimes and limit.
    package static let policy = SessionPolicy(lifetime: 30 * 86_400, idleTimeout: 7 * 86_400, maxSessionsPerUser: 100)

    package static func store(_ db: TestDatabase) -> PostgresStore {
        PostgresStore(conninfo: db.conninfo, policy: policy, log: Log { _ in })
    }

    package static func session(_ hash: SessionToken.Hash = SessionToken.generate().hash, agent: String? = "Test/1.0") -> NewSession {
        NewSession(tokenHash: hash, clientID: "1234567890-clientweb.apps.googleusercontent.com", userAgent: agent, ip: "192.0.2.7")
    }

    /// Signs `sub` in through `store`; the session's id and token hash.
    package static func signIn(_ store: PostgresStore, _ sub: String) throws -> (id: Int64, hash: SessionToken.Hash) {
        let token = SessionToken.generate()
        guard case .signedIn(let signedIn) = try store.signIn(verifiedToken(sub: sub), session(token.hash)) else {
            throw StoreError(.unexpectedResult, "refused")
        }
        return (signedIn.sessionID, token.hash)
    }
}
