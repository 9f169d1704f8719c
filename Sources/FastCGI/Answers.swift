// Writing answers: the handler's response (or the 500 that replaces one that cannot be sent), the lane's
// overload answer, and what happens to the connection after each.
import Threads

extension Dispatcher {
    /// Sends the answer to the connection's current request. True when the connection carries on (its next
    /// records may be parsed); false when it was closed: the web server did not ask to keep it, the server is
    /// stopping, or writing failed. `waiting`: the caller may wait for the peer to read (the timer may not), within
    /// the connection's write budget and, for a batch's answers, the batch's (`batchWaited`: what they waited so far).
    func answer(_ connection: Connection, _ response: Response, waiting: Bool) -> Bool {
        var waited: UInt64 = 0
        return answer(connection, response, waiting: waiting, batchWaited: &waited)
    }

    func answer(_ connection: Connection, _ response: Response, waiting: Bool, batchWaited: inout UInt64) -> Bool {
        var body = response.body
        let head: [UInt8]
        if let encoded = response.encodedHead() {
            head = encoded
        } else {
            // Fail closed: never a head with a header left out (a missing identity header reached the app).
            counters.invalid.add(1, ordering: .relaxed)
            report(FastCGIError(.invalidResponse, "status \(response.status) with a header that cannot be sent"))
            head = Response.invalidReplacement.encodedHead() ?? []
            body = Response.invalidReplacement.body
        }
        let closeAfter = !connection.parser.canContinue || stopping.isDraining
        let bytes = Records.answer(requestID: connection.parser.requestID, head: head, body: body,
                                   farewell: closeAfter && connection.parser.keepRequested)
        guard connection.write(bytes, budget: waiting ? limits.writeTimeout.nanoseconds : nil, alsoCounting: &batchWaited) else {
            writeFailed(connection)
            return false
        }
        counters.answered.add(1, ordering: .relaxed)
        if closeAfter {
            guard connection.parser.bodyLeftUnread else {
                close(connection)
                return false
            }
            // Closing with the body unread would reset the connection under the peer, which may still be
            // writing it (and lose the answer): end our side, skip the rest of the body, then close.
            connection.endWriting()
            connection.parser.haltWhenIdle = true
        }
        connection.parser.requestAnswered()
        return true
    }

    /// The lane's overload answer to `request` (counted and reported), as `answer` sends it.
    func answerOverloaded(_ connection: Connection, _ request: Request, lane: Int, waiting: Bool) -> Bool {
        var waited: UInt64 = 0
        return answerOverloaded(connection, request, lane: lane, waiting: waiting, batchWaited: &waited)
    }

    func answerOverloaded(_ connection: Connection, _ request: Request, lane: Int, waiting: Bool,
                          batchWaited: inout UInt64) -> Bool {
        counters.overloads.add(1, ordering: .relaxed)
        report(FastCGIError(.overloaded, "lane \(gates[lane].lane.name)"))
        return answer(connection, overloaded(request), waiting: waiting, batchWaited: &batchWaited)
    }

    /// The peer did not take an answer or a reply: counted, reported, and the connection closed.
    func writeFailed(_ connection: Connection) {
        counters.writeFailures.add(1, ordering: .relaxed)
        report(FastCGIError(.writeFailed, "the web server did not take the answer"))
        close(connection)
    }
}
