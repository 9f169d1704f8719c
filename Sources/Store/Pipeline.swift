// Pipelines: a batch of one statement sent at once and answered at one Sync (one write, one round trip), and
// a statement behind a transaction pooler sent after the timeouts for its transaction.
import CLibPQ

extension Connection {
    /// Runs `statement` once for each parameter list in one pipeline: every statement, then one Sync, in one
    /// write and one round trip. The statements run in order in one implicit transaction, which holds every
    /// row lock they take until its end: statements that lock rows must take them in one order across batches
    /// (sign-ins run in `google_sub` order; `Queries.checkSession` takes none it waits for). Every item gets its own
    /// rows or its own error: a statement that fails aborts the ones queued after it (and rolls back what the
    /// ones before it wrote), and the aborted ones run again in the next pipeline, so a batch of n takes at
    /// most n + 1 round trips however its statements fail. A failure that is no item's own (a timeout, the
    /// server going away: `StoreError.isOutage`) is given to every item still pending at once. A lock not
    /// granted, a deadlock or a serialization failure is one item's own only for statements that wait on rows
    /// (`waitsOnRows`, another transaction holds that item's rows), and only once per call: a second one (a
    /// table lock meets every statement) fails every pending item, so a batch waits at most two lock timeouts;
    /// for statements that wait on no row such a failure can only be a table's lock, an outage. Throws only what
    /// every item would meet alike (the connection lost, a pipeline libpq and we disagree on): the caller may
    /// run the whole batch again, so only batch statements that may run twice (the round that was running may
    /// have committed). Behind
    /// a transaction pooler the timeouts lead the pipeline (SET LOCAL for its transaction) and the statement
    /// runs unnamed.
    public func executeBatch(_ statement: Statement, _ batch: [[any SQLParameter]],
                             waitsOnRows: Bool = false) throws(StoreError) -> [Result<Rows, StoreError>] {
        try executeBatch(statement, count: batch.count, waitsOnRows: waitsOnRows) { (index) throws(StoreError) in
            try Connection.texts(batch[index])
        }
    }

    /// Runs a typed statement once for each value of its arguments in one pipeline, as `executeBatch(_:_:waitsOnRows:)`
    /// runs a statement.
    public func executeBatch<Arguments>(_ statement: TypedStatement<Arguments>, _ batch: [Arguments],
                                        waitsOnRows: Bool = false) throws(StoreError) -> [Result<Rows, StoreError>] {
        try executeBatch(statement.statement, count: batch.count, waitsOnRows: waitsOnRows) { (index) throws(StoreError) in
            try statement.texts(batch[index])
        }
    }

    /// The batch of `count` items whose parameters `itemTexts` makes, by position.
    func executeBatch(_ statement: Statement, count: Int, waitsOnRows: Bool,
                      itemTexts: (Int) throws(StoreError) -> ParameterTexts) throws(StoreError) -> [Result<Rows, StoreError>] {
        var results = [Result<Rows, StoreError>?](repeating: nil, count: count)
        var texts: [ParameterTexts] = []
        texts.reserveCapacity(count)
        var pending: [Int] = []
        for index in 0..<count {
            // Parameters are checked (count, NUL) before anything is queued: half a pipeline cannot be taken back.
            do throws(StoreError) {
                texts.append(try itemTexts(index))
                pending.append(index)
            } catch {
                texts.append(ParameterTexts(count: 0))
                results[index] = .failure(error)
            }
        }
        guard !pending.isEmpty else { return results.map { $0! } }
        try ensureConnected()
        if pooler == .none { try prepareIfNeeded(statement) }
        var reprepared = false
        var ownLockFailures = waitsOnRows ? 1 : 0
        while !pending.isEmpty {
            var again: [Int] = []
            var lostStatements = false
            var outage: StoreError?
            for (index, outcome) in zip(pending, try pipeline(statement, pending.map { texts[$0] })) {
                switch outcome {
                case .done(let rows):
                    results[index] = .success(rows)
                case .failed(let error) where error.sqlState == "26000" && pooler == .none && !reprepared:
                    lostStatements = true  // DISCARD ALL or a pooler: nothing of it ran; prepared again below
                    again.append(index)
                case .failed(let error):
                    results[index] = .failure(error)
                    guard error.isRetryable else { break }
                    if !error.isOutage && ownLockFailures > 0 {
                        ownLockFailures -= 1  // a lock, a deadlock, a lost race: this item's own
                    } else {
                        outage = outage ?? error
                    }
                case .aborted:
                    again.append(index)
                }
            }
            if let outage {
                // A timeout, the server going away or out of resources: not this item's own fault, and what the
                // others would meet too. They get it now (a 503 each) instead of one round trip, and one timeout,
                // each (and so is a lock failure past the budget above: a table's lock, not a row's).
                for index in again { results[index] = .failure(outage) }
                again = []
                lostStatements = false
            }
            if lostStatements {
                reprepared = true
                prepared[statement.name] = nil
                try prepareIfNeeded(statement)
            }
            pending = again
        }
        return results.map { $0! }
    }

    private enum Outcome {
        case done(Rows)
        case failed(StoreError)
        /// Skipped by the server after an earlier statement of the same pipeline failed.
        case aborted
    }

    /// Sends the statements and a Sync in one write and reads every result.
    private func pipeline(_ statement: Statement, _ batch: [ParameterTexts]) throws(StoreError) -> [Outcome] {
        guard PQenterPipelineMode(pg) == 1 else { throw pipelineBroken() }
        var sent = true
        if pooler == .transaction {
            sent = PQsendQueryParams(pg, Connection.localTimeouts, 0, nil, nil, nil, nil, 0) == 1
        }
        for texts in batch where sent {
            sent = Connection.withTexts(texts) { count, values in
                pooler == .none
                    ? PQsendQueryPrepared(pg, statement.name, count, values, nil, nil, 0) == 1
                    : PQsendQueryParams(pg, statement.sql, count, nil, values, nil, nil, 0) == 1
            }
        }
        // A half-sent pipeline leaves libpq's queue in a state no later call can use: start afresh next call.
        guard sent, PQpipelineSync(pg) == 1 else { throw pipelineBroken() }
        var outcomes: [Outcome] = []
        outcomes.reserveCapacity(batch.count)
        let leading = pooler == .transaction ? 1 : 0
        var leadFailed: StoreError?
        // The server answers a pipeline at its Sync, when every statement has run, each within statement_timeout.
        let statements = leading + batch.count
        for position in 0..<statements {
            try awaitResult(statements: statements)
            guard let pointer = PQgetResult(pg) else { throw pipelineBroken() }
            let result = QueryResult(pointer)
            let status = PQresultStatus(result.pointer)
            let outcome: Outcome
            if status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK || status == PGRES_EMPTY_QUERY {
                outcome = .done(result.rows())
            } else if status == PGRES_PIPELINE_ABORTED {
                outcome = leadFailed.map { .failed($0) } ?? .aborted
            } else {
                let error = failure(result.pointer)
                if needsReset { throw error }  // the session is gone (or unusable): nothing more will come
                outcome = .failed(error)
            }
            if position < leading {
                // The timeouts failed: every statement after them is aborted and gets that error.
                if case .failed(let error) = outcome { leadFailed = error }
            } else {
                outcomes.append(outcome)
            }
            // Each statement's results end with a NULL; anything else means libpq and we disagree.
            if let extra = PQgetResult(pg) {
                PQclear(extra)
                throw pipelineBroken()
            }
        }
        try awaitResult(statements: statements)
        guard let sync = PQgetResult(pg) else { throw pipelineBroken() }
        let synced = PQresultStatus(sync) == PGRES_PIPELINE_SYNC
        PQclear(sync)
        guard synced, PQexitPipelineMode(pg) == 1 else { throw pipelineBroken() }
        // A failure before the end leaves the rest aborted: the ones done before it were rolled back too.
        if let failed = outcomes.firstIndex(where: { if case .failed = $0 { true } else { false } }) {
            for index in 0..<failed { if case .done = outcomes[index] { outcomes[index] = .aborted } }
        }
        return outcomes
    }

    // MARK: - Behind a transaction pooler

    /// Runs `sql` after `localTimeouts` in one pipeline, one round trip: the two statements and the Sync after
    /// them are one implicit transaction on one server session (a pooler hands the session on only after the
    /// Sync), so the timeouts hold for this statement and end with it. A failure of either rolls both back.
    func withLocalTimeouts(_ sql: String, _ texts: ParameterTexts) throws(StoreError) -> Rows {
        // The parameters were checked (a NUL) before anything is queued: the caller made `texts`.
        switch try pipeline(Statement(name: "", sql: sql), [texts])[0] {
        case .done(let rows): return rows
        case .failed(let error): throw error
        case .aborted: throw StoreError(.unexpectedResult, "the statement was not run")
        }
    }
}
