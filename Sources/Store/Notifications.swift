// LISTEN/NOTIFY: the notifications PostgreSQL delivers to a connection, waited for with a limit.
import CLibPQ

/// A notification a `LISTEN`ing connection received: its channel and payload, in the order the server sent them
/// (commit order: a notification is delivered only once the transaction that sent it has committed).
public struct DatabaseNotification: Sendable, Equatable {
    public let channel: String
    public let payload: String
    /// The process ID of the server process that sent it (its `pg_backend_pid()`).
    public let senderPID: Int32
}

extension Connection {
    /// The notifications that have arrived, waiting at most `timeout` for the first when none has. Never sends
    /// anything: `LISTEN` first, with `query`. A connection found broken throws a retryable `connection_lost`
    /// (its `LISTEN`s are gone with its server session: open a new connection and listen again).
    public func notifications(waitingUpTo timeout: Duration) throws(StoreError) -> [DatabaseNotification] {
        guard !needsReset, PQstatus(pg) == CONNECTION_OK else { throw pipelineBroken() }
        // What has been read already (with an answer, or by an earlier call) comes first; then what the socket holds.
        guard PQconsumeInput(pg) == 1 else { throw pipelineBroken() }
        var received = drainNotifications()
        guard received.isEmpty else { return received }
        let milliseconds = Int32(clamping: max(0, Int(timeout / .milliseconds(1))))
        if try socketReadable(waitingUpTo: milliseconds) {
            // A peer that closed the socket reads as ready; libpq then reports the connection bad.
            guard PQconsumeInput(pg) == 1, PQstatus(pg) == CONNECTION_OK else { throw pipelineBroken() }
            received = drainNotifications()
        }
        return received
    }

    /// Every notification libpq has parsed, in order, each freed once copied.
    private func drainNotifications() -> [DatabaseNotification] {
        var received: [DatabaseNotification] = []
        while let notify = PQnotifies(pg) {
            received.append(DatabaseNotification(channel: String(cString: notify.pointee.relname),
                                         payload: String(cString: notify.pointee.extra),
                                         senderPID: notify.pointee.be_pid))
            PQfreemem(notify)
        }
        return received
    }
}
