// What lives on the server session: its transaction, its prepared statements, and starting it afresh.
import CLibPQ

extension Connection {
    /// Runs `body` between BEGIN and COMMIT; rolls back and rethrows when it throws. Behind a transaction
    /// pooler, the BEGIN carries the timeouts for this transaction (SET LOCAL, the same round trip).
    public func transaction<T>(_ body: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
        if pooler == .transaction {
            try run(script: Connection.beginWithLocalTimeouts)
        } else {
            try query("BEGIN")
        }
        let value: T
        do {
            value = try body(self)
        } catch {
            rollbackQuietly()
            throw error
        }
        try query("COMMIT")
        return value
    }

    /// Whether the server session is inside a transaction block (idle in transaction or failed).
    public var isInTransaction: Bool {
        let status = PQtransactionStatus(pg)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE
    }

    /// Ends a failed or abandoned transaction; a broken connection is reset on the next call anyway.
    func rollbackQuietly() {
        guard !needsReset, PQstatus(pg) == CONNECTION_OK, isInTransaction else { return }
        if let result = try? results(sent: PQsendQuery(pg, "ROLLBACK")) { PQclear(result) }
    }

    func ensureConnected() throws(StoreError) {
        guard needsReset || PQstatus(pg) != CONNECTION_OK else { return }
        // A new server session: no prepared statements, no transaction.
        prepared.removeAll()
        PQreset(pg)
        guard PQstatus(pg) == CONNECTION_OK else {
            needsReset = true
            throw StoreError(.connectionFailed, Connection.firstLine(PQerrorMessage(pg)))
        }
        CLibPQ_silenceNotices(pg)
        needsReset = false
    }

    func prepareIfNeeded(_ statement: Statement) throws(StoreError) {
        if let sql = prepared[statement.name] {
            guard sql == statement.sql else {
                throw StoreError(.invalidParameter, "two statements are named \(statement.name)")
            }
            return
        }
        _ = try rows(from: results(sent: PQsendPrepare(pg, statement.name, statement.sql, 0, nil)))
        prepared[statement.name] = statement.sql
    }
}
