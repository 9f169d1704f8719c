// A connection's steps on a worker: reading and parsing its bytes into the next request, admitting that
// request to its lane, parking the connection until its next event, and giving it back at the end of a turn.
import Glibc
import Threads

extension Dispatcher {
    /// Parses and reads until the connection's next request is complete (returned when its lane lets it run
    /// now), or the connection has left this worker: parked, queued to its lane, or closed.
    /// `riding`: a lane whose request joins the caller's batch without a slot of its own. `readAtOnce`: false
    /// parks the connection when its buffered bytes hold no complete request, rather than trying a read first.
    /// `mayWait`: an overload answer may wait for the peer to read (never while this worker holds the baton).
    func drive(_ connection: Connection, scratch: inout [UInt8], riding: Int? = nil, readAtOnce: Bool = true,
               mayWait: Bool) -> Job? {
        connection.state.withLock { $0 = .held }
        connections.stopClock(connection)
        while true {
            switch advance(connection, riding: riding, mayWait: mayWait) {
            case .run(let job): return job
            case .gone: return nil
            case .needMore:
                guard readAtOnce else {
                    park(connection)
                    return nil
                }
            }
            switch connection.read(into: &scratch) {
            case .bytes(let count):
                let now = monotonicNanoseconds()
                if connection.busySince == 0 { connection.busySince = now }
                connection.lastProgress = now
                connection.turnBytes += count
                if connection.turnBytes >= limits.readPerTurn {
                    // Its turn is over (what was read stays buffered for the next worker): a peer streaming bytes
                    // that lead to no request, or to cheap ones, cannot keep this worker.
                    counters.endedTurns.add(1, ordering: .relaxed)
                    handBack(connection)
                    return nil
                }
            case .closed:
                close(connection)
                return nil
            case .wouldBlock:
                park(connection)
                return nil
            }
        }
    }

    private enum Next {
        case run(Job)
        case gone
        case needMore
    }

    /// What the buffered bytes lead to: a request to run, management answers, a refusal, or nothing yet.
    private func advance(_ connection: Connection, riding: Int?, mayWait: Bool) -> Next {
        while connection.turnItems < Self.turn, let event = connection.parser.next() {
            connection.turnItems += 1
            switch event {
            case .request(let request):
                // The next request's clock starts with its own first byte.
                connection.busySince = 0
                var request = request
                let placement = place(request)
                request.route = placement.route
                let lane = gates.indices.contains(placement.lane) ? placement.lane : 0
                var job = Job(connection: connection, request: request, lane: lane, queued: monotonicNanoseconds())
                job.joins = gates[lane].lane.batch > 1 && placement.batches
                let slow = job.joins && !gates[lane].lane.quick
                if slowBatchesRead.load(ordering: .relaxed) != slow { slowBatchesRead.store(slow, ordering: .relaxed) }
                if lane == riding && job.joins {
                    job.rides = true
                    return .run(job)
                }
                switch gates[lane].admit(job) {
                case .run(let next):
                    return .run(next)  // this request, or an older one of its lane (this one then waits in its place)
                case .queued:
                    return .gone  // its wait is on the timer's clock (it looks every 100 ms at the latest)
                case .full:
                    // The lane's queue is full: the server answers for it, never drops the request.
                    guard answerOverloaded(connection, request, lane: lane, waiting: mayWait) else { return .gone }
                }
            case .reply(let bytes, let thenClose):
                // A management reply is never waited on: a peer that leaves it unread loses the connection.
                guard connection.write(bytes, budget: nil) else {
                    writeFailed(connection)
                    return .gone
                }
                if thenClose || stopping.isDraining {
                    close(connection)
                    return .gone
                }
            case .violation(let error):
                counters.violations.add(1, ordering: .relaxed)
                report(error)
                close(connection)
                return .gone
            }
        }
        if connection.turnItems >= Self.turn {
            counters.endedTurns.add(1, ordering: .relaxed)
            // Its turn is over: the connection goes to the back of the line (the hand-back list), so a peer
            // streaming requests or management records cannot keep this worker.
            handBack(connection)
            return .gone
        }
        if connection.parser.haltWhenIdle && !connection.parser.isDiscarding {
            close(connection)  // the body after a closing answer has been skipped
            return .gone
        }
        return .needMore
    }

    /// Requests and replies one worker handles on a connection before it gives the connection back.
    static let turn = 32

    /// Puts a connection back into the set until its next event: between requests it is idle; with a request
    /// (or, on a new connection, the first request) not complete yet, it is on the clock.
    private func park(_ connection: Connection) {
        let now = monotonicNanoseconds()
        // A connection that has not begun a request yet is on the clock from its accept (nginx writes right
        // after connecting); between requests on a kept one there is no deadline (nginx bounds idle ones).
        let idle = connection.parser.isQuiet && connection.parser.requestID != 0
        if idle {
            connection.busySince = 0
            connection.parser.shed()
            // The peer has caught up: its next busy period gets the whole write budget again (a kept
            // connection lives for days; only waits within one stretch of work are added up).
            connection.writeWaited = 0
        } else {
            // Bytes already buffered (a pipelined request's start, a body being skipped) start the clock now.
            if connection.busySince == 0 { connection.busySince = now }
            connections.startClock(connection)
        }
        // Armed with the lock held: the timer must not act on it before it is in the set, and the worker that
        // gets its next event waits here until it is marked parked.
        let parked = connection.state.withLock { state in
            guard connection.arm(in: epoll) else { return false }
            state = idle ? .idle(since: now) : .waiting
            return true
        }
        if !parked {
            connections.stopClock(connection)
            close(connection)
        }
    }

    // MARK: The hand-back list

    /// Queues a held connection for the next worker that takes the hand-back event.
    func handBack(_ connection: Connection) {
        handOff([.drive(connection)])
    }

    /// Queues connections to read and requests to run for the next worker that takes the hand-back event.
    func handOff(_ items: [Work]) {
        returned.withLock { $0.append(contentsOf: items) }
        epoll.raiseHandBack()
    }

    /// One item of the hand-back list per event: each handed-off request or connection goes to a worker of its
    /// own (the event is raised again for the rest), so none waits behind another on one thread.
    func takeHandedBack() -> Work? {
        epoll.lowerHandBack()
        let (item, more) = returned.withLock { list -> (Work?, Bool) in
            guard !list.isEmpty else { return (nil, false) }
            return (list.removeFirst(), !list.isEmpty)
        }
        epoll.rearmHandBack()
        if more { epoll.raiseHandBack() }
        if case .drive(let connection)? = item { connection.beginTurn() }
        return item
    }
}
