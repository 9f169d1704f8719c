// The dispatcher: every worker waits on one epoll set, reads the connection whose event it gets (non-blocking,
// within the parser's limits) and serves its request if the request's lane has room; a timer thread keeps
// the deadlines, the lanes' waiting times and the graceful stop.
import CLinuxFastCGI
import Glibc
import Synchronization
import Threads

/// What the server has done since it started (`Server.statistics`).
public struct Statistics: Sendable, Equatable {
    public var connectionsAccepted = 0
    public var requestsAnswered = 0
    /// Connections closed because the peer broke the protocol or a limit (each also reported).
    public var protocolViolations = 0
    /// Connections closed because a request did not arrive in time.
    public var timeouts = 0
    /// Requests answered with the lane's overload response.
    public var overloaded = 0
    /// Responses replaced by a 500 because a header could not be sent.
    public var invalidResponses = 0
    public var writeFailures = 0
}

/// The epoll set, the connections, the lanes, and the steps taken on a connection.
///
/// Every socket is registered EPOLLONESHOT: the worker that receives a connection's event holds it until it
/// parks it again, so one thread at a time touches a connection, and a new event wakes one worker, not all.
/// A worker never blocks on a peer: it reads what has arrived, and a request still arriving is parked with
/// its deadline. A complete request runs on the worker that read it when its lane has room, else it waits in
/// the lane's queue for the next of that lane's requests to finish (`LaneGate`), so the common path has no
/// hand-off between threads.
final class Dispatcher: Sendable {
    let limits: Limits
    let gates: [LaneGate]
    /// Each request's lane, and whether it may start or join a batch of a batching lane (`Server.run`).
    private let place: @Sendable (Request) -> Placement
    private let overloaded: @Sendable (Request) -> Response
    private let report: @Sendable (FastCGIError) -> Void
    private let listener: Listener
    private let epoll: Descriptor
    /// Written once when the server is done; stays readable, so every worker wakes and leaves.
    private let exit: Descriptor
    /// Armed one-shot: connections the timer gives back to the workers (after an overload answer).
    private let handBack: Descriptor
    /// Every open connection, for the drain and `maxConnections`. Touched when a connection opens and when
    /// it closes, never per request.
    private let registry = Mutex<[ObjectIdentifier: Connection]>([:])
    /// The registry's size, which the timer (and tests) wait on.
    let open: Gauge
    /// Connections parked with a request begun, each on the clock.
    private let onTheClock = Mutex<[ObjectIdentifier: Connection]>([:])
    /// Connections the timer or a worker gives back to the workers, and requests a batching worker read for
    /// other lanes (`handOff`): the next worker that takes the hand-back event serves them.
    private let returned = Mutex<[Work]>([])
    private let listening = Mutex<ListenerState>(ListenerState())
    private let timer = Wakeup()
    /// Held by the one worker that waits in the epoll set (`work`).
    private let baton = Baton()
    /// Batches that lent the baton so far: while it moves, the timer ticks every `busyTick` to rescue a lent
    /// baton in time; otherwise it naps, and the first lend after a nap pokes it.
    private let lends = Atomic<Int>(0)
    var batonLends: Int { lends.load(ordering: .relaxed) }
    /// Connections given back to the line at the end of a turn so far (tests).
    private let endedTurns = Atomic<Int>(0)
    var turnsEnded: Int { endedTurns.load(ordering: .relaxed) }
    private let timerNapping = Atomic<Bool>(false)
    static let busyTick = 5
    private let stopRequested = Atomic<Bool>(false)
    /// Set when the graceful stop begins: every answer from then on closes its connection.
    let draining = Atomic<Bool>(false)
    private let failure = Mutex<FastCGIError?>(nil)
    /// The last request read may join a batch of a lane that is not `quick` (a sign-in): under
    /// `WorkerScheduling.adaptive` the next reader waits under SCHED_BATCH.
    private let slowBatchesRead = Atomic<Bool>(false)

    private let accepted = Atomic<Int>(0)
    private let answered = Atomic<Int>(0)
    private let violations = Atomic<Int>(0)
    private let timeouts = Atomic<Int>(0)
    private let overloads = Atomic<Int>(0)
    private let invalid = Atomic<Int>(0)
    private let writeFailures = Atomic<Int>(0)

    private struct ListenerState {
        var on = true
        /// Accepting paused (out of descriptors, or at maxConnections) since then; the timer resumes it.
        var pausedAt: UInt64?
    }

    private static let listenerTag: UInt64 = 0
    private static let exitTag: UInt64 = 1
    private static let handBackTag: UInt64 = 2

    init(listener: Listener, lanes: [Lane], limits: Limits, open: Gauge, place: @escaping @Sendable (Request) -> Placement,
         overloaded: @escaping @Sendable (Request) -> Response,
         report: @escaping @Sendable (FastCGIError) -> Void) throws(FastCGIError) {
        let epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { throw FastCGIError(.startFailed, errnoText("epoll_create1")) }
        let epoll = Descriptor(epollFD)
        let exitFD = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        guard exitFD >= 0 else { throw FastCGIError(.startFailed, errnoText("eventfd")) }
        let exit = Descriptor(exitFD)
        let handBackFD = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        guard handBackFD >= 0 else { throw FastCGIError(.startFailed, errnoText("eventfd")) }
        let handBack = Descriptor(handBackFD)
        guard Self.control(epoll.raw, EPOLL_CTL_ADD, listener.fd, tag: Self.listenerTag, oneShot: true),
              Self.control(epoll.raw, EPOLL_CTL_ADD, exit.raw, tag: Self.exitTag, oneShot: false),
              Self.control(epoll.raw, EPOLL_CTL_ADD, handBack.raw, tag: Self.handBackTag, oneShot: true)
        else { throw FastCGIError(.startFailed, errnoText("epoll_ctl")) }
        self.epoll = epoll
        self.exit = exit
        self.handBack = handBack
        self.listener = listener
        self.limits = limits
        self.open = open
        self.gates = lanes.enumerated().map { LaneGate(lane: $0.element, index: $0.offset) }
        self.place = place
        self.overloaded = overloaded
        self.report = report
    }

    var statistics: Statistics {
        Statistics(connectionsAccepted: accepted.load(ordering: .relaxed), requestsAnswered: answered.load(ordering: .relaxed),
                   protocolViolations: violations.load(ordering: .relaxed), timeouts: timeouts.load(ordering: .relaxed),
                   overloaded: overloads.load(ordering: .relaxed), invalidResponses: invalid.load(ordering: .relaxed),
                   writeFailures: writeFailures.load(ordering: .relaxed))
    }

    var failed: FastCGIError? { failure.withLock { $0 } }

    /// Begins the graceful stop (any thread, any number of times).
    func requestStop() {
        stopRequested.store(true, ordering: .releasing)
        timer.poke()
    }

    private func fail(_ error: FastCGIError) {
        failure.withLock { if $0 == nil { $0 = error } }
        requestStop()
    }

    // MARK: A worker

    private enum Work {
        /// A connection whose event came: its bytes are read.
        case drive(Connection)
        /// A connection just answered: what it has buffered is parsed, else it is parked without a read (the
        /// peer's next request is rarely there yet, and re-arming reports it if it is).
        case carryOn(Connection)
        case run(Job)
    }

    /// A worker thread's life: take the next event, serve what it leads to, until the server is done.
    ///
    /// Only the worker holding the baton (the leader) waits in the epoll set; the others wait for the baton.
    /// The leader passes it on (waking one) before it runs a request or a batch of a lane that is not `quick`,
    /// so sign-ins never keep the next request from being read; for a quick lane's batch it only lends it (nobody is woken:
    /// events that arrive meanwhile wait for the batch's end and make the next batch) and takes it back if
    /// nobody took it. A batch that holds the lent baton longer than `lentBatonRescue` has the timer wake a
    /// waiting worker to read in its place.
    ///
    /// `adapting`: the worker follows `WorkerScheduling.adaptive` (it runs under SCHED_OTHER now), and reports
    /// a refused change there (the worker then stays under the policy it has).
    func work(handler: any Handler, adapting: (@Sendable (String) -> Void)? = nil) {
        var events = [epoll_event](repeating: epoll_event(), count: 1)
        var scratch = [UInt8](repeating: 0, count: 64 * 1024)
        var ready = [epoll_event](repeating: epoll_event(), count: gates.map(\.lane.batch).max() ?? 1)
        var leading = false
        var policy: Int32? = adapting == nil ? nil : Int32(SCHED_OTHER)
        while true {
            if !leading {
                baton.take()
                leading = true
            }
            if let current = policy, let refused = adapting { policy = adapt(current, refused: refused) }
            let count = epoll_wait(epoll.raw, &events, 1, -1)
            if count < 0 {
                if errno == EINTR { continue }
                baton.pass()
                fail(FastCGIError(.acceptFailed, errnoText("epoll_wait")))
                return
            }
            guard count == 1 else { continue }
            let item: Work?
            switch events[0].data.u64 {
            case Self.exitTag:
                baton.pass()  // the next worker sees the exit event too, and so on
                return
            case Self.handBackTag:
                item = takeHandedBack()
            case let tag:
                item = connection(forEvent: tag).map { .drive($0) }
            }
            if let item { serve(item, handler: handler, scratch: &scratch, ready: &ready, leading: &leading) }
        }
    }

    /// The reader's policy under `WorkerScheduling.adaptive`, taken before it waits for the next request:
    /// SCHED_BATCH after a slow request that batches, SCHED_OTHER after any other. Returns the policy it has
    /// now, or nil when the change was refused (reported; the worker stops adapting).
    private func adapt(_ current: Int32, refused: @Sendable (String) -> Void) -> Int32? {
        let wanted = slowBatchesRead.load(ordering: .relaxed) ? Server.batchPolicy : Int32(SCHED_OTHER)
        guard wanted != current else { return current }
        if let why = Server.setPolicy(wanted, for: .adaptive) {
            refused(why)
            return nil
        }
        return wanted
    }

    /// How long a batch may hold the lent baton before the timer wakes a waiting worker to read instead (the
    /// timer ticks every `busyTick` ms while a baton is lent, so new requests wait about 10 ms at most behind
    /// a stuck batch).
    static let lentBatonRescue: UInt64 = 5_000_000

    /// The connection a listener or connection event gives this worker (the listener's: one just accepted).
    private func connection(forEvent tag: UInt64) -> Connection? {
        if tag == Self.listenerTag { return acceptOne() }
        guard let pointer = UnsafeRawPointer(bitPattern: UInt(tag)) else { return nil }
        let connection = Unmanaged<Connection>.fromOpaque(pointer).takeUnretainedValue()
        connection.beginTurn()
        return connection
    }

    /// One item of the hand-back list per event: each handed-off request or connection goes to a worker of its
    /// own (the event is raised again for the rest), so none waits behind another on one thread.
    private func takeHandedBack() -> Work? {
        var value: UInt64 = 0
        _ = Glibc.read(handBack.raw, &value, 8)
        let (item, more) = returned.withLock { list -> (Work?, Bool) in
            guard !list.isEmpty else { return (nil, false) }
            return (list.removeFirst(), !list.isEmpty)
        }
        rearmHandBack()
        if more { raiseHandBack() }
        if case .drive(let connection)? = item { connection.beginTurn() }
        return item
    }

    private func rearmHandBack() {
        _ = Self.control(epoll.raw, EPOLL_CTL_MOD, handBack.raw, tag: Self.handBackTag, oneShot: true)
    }

    private func raiseHandBack() {
        var one: UInt64 = 1
        _ = Glibc.write(handBack.raw, &one, 8)
    }

    /// Everything one event leads to on this worker: reading the connection, running its request (with the
    /// others of a batching lane that are ready), the next request waiting in that lane, and what follows on
    /// each connection.
    private func serve(_ first: Work, handler: any Handler, scratch: inout [UInt8], ready: inout [epoll_event],
                       leading: inout Bool) {
        var work = [first]
        while let item = work.popLast() {
            switch item {
            case .drive(let connection):
                if let job = drive(connection, scratch: &scratch, mayWait: !leading) { work.append(.run(job)) }
            case .carryOn(let connection):
                if let job = drive(connection, scratch: &scratch, readAtOnce: false, mayWait: !leading) { work.append(.run(job)) }
            case .run(let job):
                let gate = gates[job.lane]
                var jobs = [job]
                var handedOff = false
                if job.joins { handedOff = gather(&jobs, scratch: &scratch, ready: &ready) }
                let now = monotonicNanoseconds()
                var lent = false
                if leading {
                    // Lent for a quick lane's batch, unless requests of other lanes were handed off on the way:
                    // then a worker must wake to run them now.
                    if job.joins && gate.lane.quick && !handedOff {
                        lendBaton(now: now)
                        lent = true
                    } else {
                        baton.pass()
                        leading = false
                    }
                }
                var due: [Job] = []
                var carryOn: [Connection] = []
                // The batch's answers share one write budget: peers that leave their answers unread cannot add
                // their waits up in front of the others' (each connection's own budget still holds).
                var batchWaited: UInt64 = 0
                for job in jobs {
                    if now &- job.queued > gate.lane.maxWait.nanoseconds {
                        if answerOverloaded(job.connection, job.request, lane: job.lane, waiting: true, batchWaited: &batchWaited) {
                            carryOn.append(job.connection)
                        }
                    } else {
                        due.append(job)
                    }
                }
                let responses = due.isEmpty ? [] : due.count == 1 ? [handler.handle(due[0].request)] : handler.handle(batch: due.map(\.request))
                for (index, job) in due.enumerated() {
                    // A handler that answers fewer requests than it was given: those left get the 500 (reported).
                    var response = Response.invalidReplacement
                    if index < responses.count {
                        response = responses[index]
                    } else {
                        invalid.add(1, ordering: .relaxed)
                        report(FastCGIError(.invalidResponse, "the handler answered \(responses.count) of a batch of \(due.count)"))
                    }
                    if answer(job.connection, response, waiting: true, batchWaited: &batchWaited) { carryOn.append(job.connection) }
                }
                if lent { leading = baton.reclaim() }
                // The lane's next waiting request takes this one's place; first these connections are read or
                // parked, so their next requests are not held up behind the queue.
                if let next = gate.finished() { work.append(.run(next)) }
                for connection in carryOn.reversed() { work.append(.carryOn(connection)) }
            }
        }
    }

    /// Lends the baton for a batch, and wakes the timer if it naps, so a batch that holds it too long is
    /// rescued in time (`run`).
    private func lendBaton(now: UInt64) {
        baton.lend(now: now)
        lends.add(1, ordering: .sequentiallyConsistent)
        if timerNapping.load(ordering: .sequentiallyConsistent), timerNapping.exchange(false, ordering: .sequentiallyConsistent) {
            timer.poke()
        }
    }

    /// Adds to a batch (its first job holds one of the lane's slots) the lane's waiting jobs, then the requests
    /// already complete on connections whose events are waiting, taken without sleeping. Other lanes'
    /// requests read on the way are admitted to their lanes as usual and handed off to the other workers
    /// (`handOff`), never run after the batch on this one. True when it handed some off or saw hand-back work
    /// waiting: the caller then wakes a worker for it rather than only lending the baton.
    private func gather(_ jobs: inout [Job], scratch: inout [UInt8], ready: inout [epoll_event]) -> Bool {
        let lane = jobs[0].lane
        let limit = gates[lane].lane.batch
        jobs += gates[lane].takeWaiting(upTo: limit - jobs.count)
        guard jobs.count < limit else { return false }
        let count = epoll_wait(epoll.raw, &ready, Int32(min(limit - jobs.count, ready.count)), 0)
        guard count > 0 else { return false }
        var others: [Work] = []
        var handedBack = false
        for index in 0..<Int(count) {
            switch ready[index].data.u64 {
            case Self.handBackTag:
                // Work handed back is another worker's to take (re-armed: the event stays raised), never
                // handed off again behind newer work.
                rearmHandBack()
                handedBack = true
            case Self.exitTag:
                continue  // comes only once no connection is open, so never while this worker holds some
            case let tag:
                guard let connection = connection(forEvent: tag) else { continue }
                // A request of this lane that may join rides without a slot of its own while there is room; any
                // other was admitted to its lane (and holds a slot there, or waits in its queue).
                let riding = jobs.count < limit ? lane : nil
                guard let job = drive(connection, scratch: &scratch, riding: riding, mayWait: false) else { continue }
                if job.rides { jobs.append(job) } else { others.append(.run(job)) }
            }
        }
        guard !others.isEmpty else { return handedBack }
        handOff(others)
        return true
    }

    /// Parses and reads until the connection's next request is complete (returned when its lane lets it run
    /// now), or the connection has left this worker: parked, queued to its lane, or closed.
    /// `riding`: a lane whose request joins the caller's batch without a slot of its own. `readAtOnce`: false
    /// parks the connection when its buffered bytes hold no complete request, rather than trying a read first.
    /// `mayWait`: an overload answer may wait for the peer to read (never while this worker holds the baton).
    private func drive(_ connection: Connection, scratch: inout [UInt8], riding: Int? = nil, readAtOnce: Bool = true,
                       mayWait: Bool) -> Job? {
        connection.state.withLock { $0 = .held }
        if connection.onTheClock {
            connection.onTheClock = false
            _ = onTheClock.withLock { $0.removeValue(forKey: ObjectIdentifier(connection)) }
        }
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
                    endedTurns.add(1, ordering: .relaxed)
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
                let placement = place(request)
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
                if thenClose || draining.load(ordering: .relaxed) {
                    close(connection)
                    return .gone
                }
            case .violation(let error):
                violations.add(1, ordering: .relaxed)
                report(error)
                close(connection)
                return .gone
            }
        }
        if connection.turnItems >= Self.turn {
            endedTurns.add(1, ordering: .relaxed)
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

    /// Queues a held connection for the next worker that takes the hand-back event.
    private func handBack(_ connection: Connection) {
        handOff([.drive(connection)])
    }

    /// Queues connections to read and requests to run for the next worker that takes the hand-back event.
    private func handOff(_ items: [Work]) {
        returned.withLock { $0.append(contentsOf: items) }
        raiseHandBack()
    }

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
            connection.onTheClock = true
            onTheClock.withLock { $0[ObjectIdentifier(connection)] = connection }
        }
        // Armed with the lock held: the timer must not act on it before it is in the set, and the worker that
        // gets its next event waits here until it is marked parked.
        let parked = connection.state.withLock { state in
            guard arm(connection) else { return false }
            state = idle ? .idle(since: now) : .waiting
            return true
        }
        if !parked {
            if connection.onTheClock {
                connection.onTheClock = false
                _ = onTheClock.withLock { $0.removeValue(forKey: ObjectIdentifier(connection)) }
            }
            close(connection)
        }
    }

    private func arm(_ connection: Connection) -> Bool {
        let tag = UInt64(UInt(bitPattern: Unmanaged.passUnretained(connection).toOpaque()))
        let done = Self.control(epoll.raw, connection.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, connection.fd, tag: tag, oneShot: true)
        if done { connection.registered = true }
        return done
    }

    /// Accepts one connection (the listener's event is one-shot: re-armed here, so one worker accepts at a time).
    private func acceptOne() -> Connection? {
        listening.withLock { listening -> Connection? in
            guard listening.on, listening.pausedAt == nil else { return nil }
            guard open.current < limits.maxConnections else {
                listening.pausedAt = monotonicNanoseconds()
                timer.poke()
                return nil
            }
            let fd = clinuxfastcgi_accept_nonblocking(listener.fd)
            guard fd >= 0 else {
                switch errno {
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors or memory: the connection stays queued; the timer resumes in 10 ms.
                    listening.pausedAt = monotonicNanoseconds()
                    timer.poke()
                case EBADF, EINVAL, ENOTSOCK, EOPNOTSUPP, EFAULT:
                    listening.on = false
                    fail(FastCGIError(.acceptFailed, errnoText("accept")))
                default:
                    // EAGAIN (another process sharing the socket took it), ECONNABORTED, EPROTO, what a TCP
                    // connection can die of before it is accepted, EPERM from a security module: that
                    // connection is lost, the listener is fine.
                    _ = Self.control(epoll.raw, EPOLL_CTL_MOD, listener.fd, tag: Self.listenerTag, oneShot: true)
                }
                return nil
            }
            _ = Self.control(epoll.raw, EPOLL_CTL_MOD, listener.fd, tag: Self.listenerTag, oneShot: true)
            let connection = Connection(Descriptor(fd), limits: limits, now: monotonicNanoseconds())
            registry.withLock { $0[ObjectIdentifier(connection)] = connection }
            open.add(1)
            accepted.add(1, ordering: .relaxed)
            return connection
        }
    }

    // MARK: Answers

    /// Sends the answer to the connection's current request. True when the connection carries on (its next
    /// records may be parsed); false when it was closed: the web server did not ask to keep it, the server is
    /// stopping, or writing failed. `waiting`: the caller may wait for the peer to read (the timer may not), within
    /// the connection's write budget and, for a batch's answers, the batch's (`batchWaited`: what they waited so far).
    private func answer(_ connection: Connection, _ response: Response, waiting: Bool) -> Bool {
        var waited: UInt64 = 0
        return answer(connection, response, waiting: waiting, batchWaited: &waited)
    }

    private func answer(_ connection: Connection, _ response: Response, waiting: Bool, batchWaited: inout UInt64) -> Bool {
        var body = response.body
        let head: [UInt8]
        if let encoded = response.encodedHead() {
            head = encoded
        } else {
            // Fail closed: never a head with a header left out (a missing identity header reached the app).
            invalid.add(1, ordering: .relaxed)
            report(FastCGIError(.invalidResponse, "status \(response.status) with a header that cannot be sent"))
            head = Response.invalidReplacement.encodedHead() ?? []
            body = Response.invalidReplacement.body
        }
        let closeAfter = !connection.parser.canContinue || draining.load(ordering: .relaxed)
        let bytes = Records.answer(requestID: connection.parser.requestID, head: head, body: body,
                                   farewell: closeAfter && connection.parser.keepRequested)
        guard connection.write(bytes, budget: waiting ? limits.writeTimeout.nanoseconds : nil, alsoCounting: &batchWaited) else {
            writeFailed(connection)
            return false
        }
        answered.add(1, ordering: .relaxed)
        if closeAfter {
            guard connection.parser.bodyLeftUnread else {
                close(connection)
                return false
            }
            // Closing with the body unread would reset the connection under the peer, which may still be
            // writing it (and lose the answer): end our side, skip the rest of the body, then close.
            _ = shutdown(connection.fd, Int32(SHUT_WR))
            connection.parser.haltWhenIdle = true
        }
        connection.parser.requestAnswered()
        return true
    }

    private func answerOverloaded(_ connection: Connection, _ request: Request, lane: Int, waiting: Bool) -> Bool {
        var waited: UInt64 = 0
        return answerOverloaded(connection, request, lane: lane, waiting: waiting, batchWaited: &waited)
    }

    private func answerOverloaded(_ connection: Connection, _ request: Request, lane: Int, waiting: Bool,
                                  batchWaited: inout UInt64) -> Bool {
        overloads.add(1, ordering: .relaxed)
        report(FastCGIError(.overloaded, "lane \(gates[lane].lane.name)"))
        return answer(connection, overloaded(request), waiting: waiting, batchWaited: &batchWaited)
    }

    private func writeFailed(_ connection: Connection) {
        writeFailures.add(1, ordering: .relaxed)
        report(FastCGIError(.writeFailed, "the web server did not take the answer"))
        close(connection)
    }

    /// Closes a connection the caller holds, and forgets it.
    private func close(_ connection: Connection) {
        connection.state.withLock { $0 = .closed }
        connection.close()
        let removed = registry.withLock { $0.removeValue(forKey: ObjectIdentifier(connection)) != nil }
        if removed { open.add(-1) }
    }

    private static func control(_ epoll: Int32, _ operation: Int32, _ fd: Int32, tag: UInt64, oneShot: Bool) -> Bool {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | (oneShot ? EPOLLONESHOT.rawValue : 0)
        event.data.u64 = tag
        return epoll_ctl(epoll, operation, fd, &event) == 0
    }

    // MARK: The timer

    /// Keeps the clocks until the graceful stop has closed every connection, then lets the workers go.
    func run() {
        var drainStart: UInt64?
        var lastIdleSweep: UInt64 = 0
        var lastLends = 0
        while true {
            if stopRequested.load(ordering: .acquiring) && drainStart == nil {
                let now = monotonicNanoseconds()
                drainStart = now
                beginDrain(now: now)
            }
            if drainStart != nil && open.current == 0 { break }
            // Every 20 ms while something is on the clock, else every 100 ms (how late a deadline may be noticed
            // after a connection starts arriving or a request starts waiting, which do not wake the timer).
            let timed = drainStart != nil || onTheClock.withLock { !$0.isEmpty } || listening.withLock { $0.pausedAt != nil }
            var milliseconds = timed ? 20 : 100
            // Batches lending the baton: tick often enough to rescue one that is stuck. Napping is announced
            // before the last look at the count, and a lend counts before it looks for the nap, so either the
            // timer sees the lend or the lender sees the nap (and pokes).
            timerNapping.store(true, ordering: .sequentiallyConsistent)
            let lendsNow = lends.load(ordering: .sequentiallyConsistent)
            // A baton still lent keeps the short tick until it is taken back or rescued (a poke may have cut
            // the last wait short, before the lend was old enough to rescue).
            if lendsNow != lastLends || baton.isLent {
                timerNapping.store(false, ordering: .sequentiallyConsistent)
                milliseconds = Self.busyTick
            }
            lastLends = lendsNow
            timer.wait(milliseconds: milliseconds)
            timerNapping.store(false, ordering: .sequentiallyConsistent)
            let now = monotonicNanoseconds()
            tick(now: now, drainStart: drainStart)
            // Kept connections idle past `Limits.idleTimeout`: looked for once a second.
            if now &- lastIdleSweep >= 1_000_000_000 {
                lastIdleSweep = now
                closeIdle(now: now)
            }
        }
        var one: UInt64 = 1
        _ = Glibc.write(exit.raw, &one, 8)
    }

    func tick(now: UInt64, drainStart: UInt64?) {
        // Requests that are taking too long, or have gone silent half-way: shut down, so the next event (end of
        // file) has the worker that receives it close the connection.
        let total = limits.requestTimeout.nanoseconds
        let stall = min(limits.stallTimeout, limits.requestTimeout).nanoseconds
        for connection in onTheClock.withLock({ Array($0.values) }) {
            connection.state.withLock { state in
                guard state == .waiting, !connection.shutDown else { return }
                let overall = elapsed(now, since: connection.busySince) >= total
                guard overall || elapsed(now, since: connection.lastProgress) >= stall else { return }
                timeouts.add(1, ordering: .relaxed)
                report(FastCGIError(.requestTimedOut, overall ? "request not complete within \(limits.requestTimeout)"
                                        : "no byte for \(min(limits.stallTimeout, limits.requestTimeout)) mid-request"))
                connection.shutDown = true
                _ = shutdown(connection.fd, Int32(SHUT_RDWR))
            }
        }
        // Requests that have waited in their lane's queue too long get the overload answer from here: the
        // lane's running requests may all be held (by a database lock, say), and none is left unanswered.
        for gate in gates where gate.count > 0 {
            for job in gate.expire(queuedBefore: now &- min(now, gate.lane.maxWait.nanoseconds)) {
                guard answerOverloaded(job.connection, job.request, lane: gate.index, waiting: false) else { continue }
                handBack(job.connection)
            }
        }
        baton.rescue(lentBefore: now &- min(now, Self.lentBatonRescue))
        listening.withLock { listening in
            guard let pausedAt = listening.pausedAt, listening.on, elapsed(now, since: pausedAt) >= 10_000_000,
                  open.current < limits.maxConnections else { return }
            if Self.control(epoll.raw, EPOLL_CTL_MOD, listener.fd, tag: Self.listenerTag, oneShot: true) { listening.pausedAt = nil }
        }
        if let drainStart { drain(now: now, since: drainStart) }
    }

    /// Kept connections idle past `idleTimeout` are shut down (the worker that gets their end of file closes
    /// them), so peers that never close cannot hold the connection slots.
    func closeIdle(now: UInt64) {
        let limit = limits.idleTimeout.nanoseconds
        for connection in registry.withLock({ Array($0.values) }) {
            connection.state.withLock { state in
                guard case .idle(let since) = state, !connection.shutDown, elapsed(now, since: since) >= limit else { return }
                timeouts.add(1, ordering: .relaxed)
                report(FastCGIError(.requestTimedOut, "kept connection idle for \(limits.idleTimeout)"))
                connection.shutDown = true
                _ = shutdown(connection.fd, Int32(SHUT_RDWR))
            }
        }
    }

    private func beginDrain(now: UInt64) {
        draining.store(true, ordering: .releasing)
        listening.withLock { listening in
            listening.on = false
            _ = epoll_ctl(epoll.raw, EPOLL_CTL_DEL, listener.fd, nil)
            // An inherited socket stays open for the next process (connections queued on it wait there); one we
            // opened is closed and its file removed, so new connections are refused at once.
            listener.close()
        }
        drain(now: now, since: now)
    }

    /// Lets go of idle kept connections without racing nginx: each gets the farewell record, which makes nginx
    /// close it from its side (a close nginx initiates cannot meet a request it is sending); one still open
    /// `drainIdle` after its farewell (a peer that is not nginx) is shut down. At `drainTimeout` everything
    /// parked is shut down; requests being answered still are.
    private func drain(now: UInt64, since start: UInt64) {
        let force = now &- start >= limits.drainTimeout.nanoseconds
        let patience = limits.drainIdle.nanoseconds
        for connection in registry.withLock({ Array($0.values) }) {
            connection.state.withLock { state in
                guard !connection.shutDown else { return }
                switch state {
                case .idle:
                    if !force {
                        if connection.farewellSent == 0 {
                            connection.farewellSent = max(now, 1)
                            let farewell = Records.farewell(requestID: max(connection.parser.requestID, 1))
                            if connection.write(farewell, budget: nil) { return }
                        } else {
                            guard now &- connection.farewellSent >= patience else { return }
                            var waiting: UInt8 = 0
                            // Bytes already waiting are a request the peer sent: it is read and answered.
                            if recv(connection.fd, &waiting, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) == 1 { return }
                        }
                    }
                case .waiting:
                    guard force else { return }
                case .held, .closed:
                    return
                }
                connection.shutDown = true
                _ = shutdown(connection.fd, Int32(SHUT_RDWR))
            }
        }
    }
}

/// Nanoseconds from `since` to `now`, 0 when `since` is later: the timer reads the clock once per tick, and a
/// worker may stamp a connection after that (wrapping around would make a fresh stamp look ages old).
private func elapsed(_ now: UInt64, since: UInt64) -> UInt64 {
    now > since ? now - since : 0
}

/// The timer thread's sleep: until `poke()` or the timeout.
private struct Wakeup: Sendable {
    private let poked = Monitor(false)

    func poke() { poked.update { $0 = true } }

    /// Waits for a poke, at most `milliseconds` (nil: no limit).
    func wait(milliseconds: Int?) {
        poked.wait(until: { $0 }, deadline: milliseconds.map { monotonicDeadline(after: .milliseconds($0)) }, then: { $0 = false })
    }
}
